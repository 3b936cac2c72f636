package main

import (
	"context"
	"io"
)

func runQuota(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errUsage
}
