// Package logging builds the zap logger of every binary: JSON for log
// collectors in production, a console encoder when a person is watching a
// terminal. Field names are fixed (topic, partition, offset, event_id,
// merchant_id, outcome, attempt) so one query finds a message in every program.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// Formats of LOG_FORMAT.
const (
	FormatAuto    = "auto" // console on a terminal, else JSON
	FormatJSON    = "json"
	FormatConsole = "console"
)

// Options shape a logger.
type Options struct {
	Level  string // debug, info, warn or error
	Format string // FormatAuto (the default), FormatJSON or FormatConsole
	// Sampling thins repeated debug and info lines (zap's 100 per second, then
	// every 100th). Warnings and errors are never sampled: a dead letter or a
	// stale cache is a line an on-call engineer must be able to count.
	Sampling bool
}

// Build returns a logger writing to stderr.
func Build(o Options) (*zap.Logger, error) {
	return build(o, os.Stderr)
}

func build(o Options, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("logging: LOG_LEVEL=%q: %w", o.Level, err)
	}
	enc, err := encoder(o.Format, w)
	if err != nil {
		return nil, err
	}
	out := zapcore.Lock(zapcore.AddSync(w))
	var core zapcore.Core = zapcore.NewCore(enc, out, lvl)
	if o.Sampling {
		core = sampledBelowWarn{Core: core, sampled: zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)}
	}
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(out)), nil
}

// encoder is the JSON encoder of every program, or the console one.
func encoder(format string, w io.Writer) (zapcore.Encoder, error) {
	switch format {
	case FormatConsole:
		return zapcore.NewConsoleEncoder(consoleConfig()), nil
	case FormatJSON:
		return zapcore.NewJSONEncoder(jsonConfig()), nil
	case FormatAuto, "":
		if isTerminal(w) {
			return zapcore.NewConsoleEncoder(consoleConfig()), nil
		}
		return zapcore.NewJSONEncoder(jsonConfig()), nil
	}
	return nil, fmt.Errorf("logging: LOG_FORMAT=%q is not json, console or auto", format)
}

func jsonConfig() zapcore.EncoderConfig {
	c := zap.NewProductionEncoderConfig()
	c.TimeKey = "ts"
	c.EncodeTime = zapcore.ISO8601TimeEncoder
	return c
}

func consoleConfig() zapcore.EncoderConfig {
	c := zap.NewDevelopmentEncoderConfig()
	c.EncodeLevel = zapcore.CapitalColorLevelEncoder
	c.EncodeTime = zapcore.ISO8601TimeEncoder
	return c
}

// sampledBelowWarn sends debug and info entries through the sampler and the
// rest straight to the core.
type sampledBelowWarn struct {
	zapcore.Core
	sampled zapcore.Core
}

func (c sampledBelowWarn) With(fields []zapcore.Field) zapcore.Core {
	return sampledBelowWarn{Core: c.Core.With(fields), sampled: c.sampled.With(fields)}
}

func (c sampledBelowWarn) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.WarnLevel {
		return c.sampled.Check(e, ce)
	}
	return c.Core.Check(e, ce)
}

// Failure writes the last line of a program that stops on err: one JSON
// object of a fixed shape (level, ts, msg, program, error, and problems for a
// configuration error), whatever failed and whether or not a logger was built
// yet; plain "program: error" text when format asks for the console.
func Failure(w io.Writer, program, format string, err error) {
	if format == FormatConsole || (format != FormatJSON && isTerminal(w)) {
		fmt.Fprintf(w, "%s: %v\n", program, err)
		return
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(jsonConfig()), zapcore.AddSync(w), zapcore.DebugLevel))
	fields := []zap.Field{zap.String("program", program), zap.Error(err)}
	if problems := problemsOf(err); len(problems) > 0 {
		fields = append(fields, zap.Strings("problems", problems))
	}
	log.Error("stopped on an error", fields...)
}

// problemsOf lists the joined errors of err (config reports every broken variable).
func problemsOf(err error) []string {
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) {
		return nil
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
