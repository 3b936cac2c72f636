// Package cli is the command-line convention of the four programs: --help
// prints the usage once, to stdout, and succeeds; --version prints the build;
// a bad flag or argument is told on stderr with a hint and exits 2; --output
// is text or json wherever a result is printed. It parses with the standard
// flag package (so -flag and --flag both work, as they always did).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quotaflow/billing/internal/buildinfo"
	"github.com/quotaflow/billing/internal/config"
)

// Exit codes shared by every program (the reconciler adds its own above 2).
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2 // bad command line or environment: nothing was done
)

var (
	// ErrUsage means the command line was wrong; the problem has been told.
	ErrUsage = errors.New("usage")
	// ErrDone means help or the version was printed: nothing else to do.
	ErrDone = errors.New("done")
)

// Output formats.
const (
	Text = "text"
	JSON = "json"
)

// FlagSet is a flag.FlagSet that knows its usage text and the convention.
type FlagSet struct {
	*flag.FlagSet
	usage          string
	stdout, stderr io.Writer
	version        bool
	output         *string
}

// NewFlagSet returns the flag set of command name ("billingctl dlq ls"),
// whose usage (synopsis and description) precedes the flag list in --help.
func NewFlagSet(name, usage string, stdout, stderr io.Writer) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), usage: usage, stdout: stdout, stderr: stderr}
	fs.SetOutput(stderr)
	fs.FlagSet.Usage = func() {} // help is printed by Parse, errors by the flag package
	fs.BoolVar(&fs.version, "version", false, "print the version and exit")
	return fs
}

// Output registers --output (text or json) and returns its value.
func (fs *FlagSet) Output() *string {
	fs.output = fs.String("output", Text, "result format: text or json")
	return fs.output
}

// Parse parses args. It returns ErrDone after printing help or the version,
// ErrUsage after telling what is wrong (an unknown flag, a bad value, a stray
// argument, an --output other than text or json), else nil.
func (fs *FlagSet) Parse(args []string) error {
	err := fs.FlagSet.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.PrintUsage(fs.stdout)
		return ErrDone
	case err != nil: // the flag package has printed the problem
		fmt.Fprintf(fs.stderr, "Run '%s --help' for usage.\n", fs.Name())
		return ErrUsage
	case fs.version:
		PrintVersion(fs.stdout, fs.Name())
		return ErrDone
	case fs.NArg() > 0:
		return fs.Fail("unexpected argument %q", fs.Arg(0))
	case fs.output != nil && *fs.output != Text && *fs.output != JSON:
		return fs.Fail("--output %q is not text or json", *fs.output)
	}
	return nil
}

// Fail tells a problem with the command line and returns ErrUsage.
func (fs *FlagSet) Fail(format string, args ...any) error {
	fmt.Fprintf(fs.stderr, "%s: %s\nRun '%s --help' for usage.\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return ErrUsage
}

// PrintUsage writes the usage text and the flags.
func (fs *FlagSet) PrintUsage(w io.Writer) {
	fmt.Fprint(w, strings.TrimRight(fs.usage, "\n")+"\n\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(fs.stderr)
}

// PrintVersion writes "program version ..." (the first word of name).
func PrintVersion(w io.Writer, name string) {
	prog, _, _ := strings.Cut(name, " ")
	fmt.Fprintf(w, "%s %s\n", prog, buildinfo.Get())
}

// Command is a subcommand: its name, its usage (whose second paragraph, the
// synopsis, its parent's help lists) and what runs it with the arguments
// after the name.
type Command struct {
	Name  string
	Usage string
	Run   func(ctx context.Context, args []string) error
}

// Usage is the help of a program or command made of cmds: head, the synopsis
// of every command, then foot. Built from the table, it omits none.
func Usage(head string, cmds []Command, foot string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(head, "\n") + "\n\n")
	for _, c := range cmds {
		if paras := strings.SplitN(c.Usage, "\n\n", 3); len(paras) > 1 {
			b.WriteString(strings.TrimRight(paras[1], "\n") + "\n")
		}
	}
	return b.String() + "\n" + foot
}

// Dispatch runs the command args[0] names. Help (help, -h, --help) prints
// usage to stdout and returns ErrDone, as does --version after the version; no
// command or an unknown one is told on stderr (ErrUsage).
func Dispatch(ctx context.Context, name, usage string, cmds []Command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s\nRun '%s --help' for usage.\n", strings.TrimRight(usage, "\n"), name)
		return ErrUsage
	}
	if i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name == args[0] }); i >= 0 {
		return cmds[i].Run(ctx, args[1:])
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return ErrDone
	case "-version", "--version":
		PrintVersion(stdout, name)
		return ErrDone
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\nRun '%s --help' for usage.\n", name, args[0], name)
	return ErrUsage
}

// Code is the exit code of err: 0 for nil and ErrDone, ExitUsage for ErrUsage
// and a bad environment (*config.Error), else ExitFailed.
func Code(err error) int {
	var ce *config.Error
	switch {
	case err == nil, errors.Is(err, ErrDone):
		return ExitOK
	case errors.Is(err, ErrUsage), errors.As(err, &ce):
		return ExitUsage
	}
	return ExitFailed
}
