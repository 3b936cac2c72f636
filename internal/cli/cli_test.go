package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/config"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args           []string
		err            error
		stdout, stderr string
	}{
		{[]string{"--n", "3"}, nil, "", ""},
		{[]string{"--help"}, ErrDone, "prog sub: does things\n\nFlags:\n", ""},
		{[]string{"-h"}, ErrDone, "-output", ""},
		{[]string{"--version"}, ErrDone, "prog version ", ""},
		{[]string{"--nope"}, ErrUsage, "", "flag provided but not defined: -nope\nRun 'prog sub --help' for usage.\n"},
		{[]string{"--n", "x"}, ErrUsage, "", "invalid value"},
		{[]string{"stray"}, ErrUsage, "", `prog sub: unexpected argument "stray"`},
		{[]string{"--output", "yaml"}, ErrUsage, "", `--output "yaml" is not text or json`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		fs := NewFlagSet("prog sub", "prog sub: does things\n", &stdout, &stderr)
		fs.Int("n", 0, "a number")
		fs.Output()
		err := fs.Parse(c.args)
		if !errors.Is(err, c.err) && !(err == nil && c.err == nil) {
			t.Errorf("%v: err %v, want %v", c.args, err, c.err)
		}
		if !strings.Contains(stdout.String(), c.stdout) || (c.stdout == "" && stdout.Len() > 0) {
			t.Errorf("%v: stdout %q, want %q", c.args, stdout.String(), c.stdout)
		}
		if !strings.Contains(stderr.String(), c.stderr) || (c.stderr == "" && stderr.Len() > 0) {
			t.Errorf("%v: stderr %q, want %q", c.args, stderr.String(), c.stderr)
		}
		if strings.Count(stdout.String(), "does things") > 1 {
			t.Errorf("%v: usage printed twice", c.args)
		}
	}
}

func TestDispatch(t *testing.T) {
	ran := ""
	cmds := []Command{{Name: "a", Run: func(_ context.Context, args []string) error { ran = fmt.Sprint(args); return nil }}}
	cases := []struct {
		args           []string
		err            error
		stdout, stderr string
	}{
		{[]string{"a", "x"}, nil, "", ""},
		{nil, ErrUsage, "", "usage of p"},
		{[]string{"--help"}, ErrDone, "usage of p", ""},
		{[]string{"help"}, ErrDone, "usage of p", ""},
		{[]string{"--version"}, ErrDone, "p version", ""},
		{[]string{"b"}, ErrUsage, "", `p: unknown command "b"`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := Dispatch(context.Background(), "p", "usage of p\n", cmds, c.args, &stdout, &stderr)
		if !errors.Is(err, c.err) && !(err == nil && c.err == nil) {
			t.Errorf("%v: err %v, want %v", c.args, err, c.err)
		}
		if !strings.Contains(stdout.String(), c.stdout) || (c.stdout == "" && stdout.Len() > 0) {
			t.Errorf("%v: stdout %q", c.args, stdout.String())
		}
		if !strings.Contains(stderr.String(), c.stderr) || (c.stderr == "" && stderr.Len() > 0) {
			t.Errorf("%v: stderr %q", c.args, stderr.String())
		}
	}
	if ran != "[x]" {
		t.Errorf("command ran with %q", ran)
	}
}

func TestCode(t *testing.T) {
	_, cfgErr := config.Load(func(k string) string { return map[string]string{"LOCK_TTL": "soon"}[k] })
	cases := []struct {
		err  error
		code int
	}{
		{nil, 0}, {ErrDone, 0}, {ErrUsage, 2}, {fmt.Errorf("x: %w", cfgErr), 2}, {errors.New("boom"), 1},
	}
	for _, c := range cases {
		if got := Code(c.err); got != c.code {
			t.Errorf("Code(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}
