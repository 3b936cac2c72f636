package main

import (
	"context"
	"io"
)

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errUsage
}
