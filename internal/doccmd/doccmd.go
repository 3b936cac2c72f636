// Package doccmd finds the commands of the four programs that the
// documentation tells operators to run (the README, the alert rules, any
// runbook), so tests can run each one and a quoted command cannot rot.
package doccmd

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Programs are the binaries of the repository.
var Programs = []string{"billing-worker", "reconciler", "billingctl", "billing-sim"}

// Command is one quoted command.
type Command struct {
	Source  string   // file:line
	Program string   // one of Programs
	Args    []string // after the program name
	Text    string   // as quoted
}

func (c Command) String() string { return c.Source + ": " + c.Text }

// Placeholders are the example values given to commands quoted with an
// alert-template value ({{ $labels.class }}) or a placeholder argument (M, N).
var Placeholders = map[string]string{"$labels.class": "conflict", "$labels.kind": "redis_high", "$labels.instance": "worker-0",
	"M": "m-1", "N": "1"}

// Sources are the documentation files under root that quote commands: the
// README, docs/*.md, the alert rules, and every file named like a runbook.
func Sources(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := append([]string{filepath.Join(root, "README.md")}, docs...)
	out = append(out, filepath.Join(root, "deployments", "helm", "billing", "files", "alerts.yml"))
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root:
			return filepath.SkipDir
		case !d.IsDir() && !slices.Contains(out, path) && strings.Contains(strings.ToLower(d.Name()), "runbook") &&
			slices.Contains([]string{".md", ".yml", ".yaml", ".txt"}, filepath.Ext(d.Name())):
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

// Find returns the commands quoted in the sources under root, in order.
func Find(root string) ([]Command, error) {
	files, err := Sources(root)
	if err != nil {
		return nil, err
	}
	var out []Command
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		out = append(out, Parse(rel, string(b))...)
	}
	return out, nil
}

var (
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	template   = regexp.MustCompile(`\{\{\s*([^}]*?)\s*\}\}`)
)

// shells are the fence languages of command blocks; other fenced blocks
// (diagrams, sample output) quote no commands.
var shells = []string{"sh", "bash", "shell", "console"}

// Parse finds the commands in one file's text: each line of a shell code
// block (continued by a trailing backslash, "$ " prompt and "# comment"
// dropped), and each inline code span, that starts with a program (as
// "billingctl", "bin/billingctl", "go run ./cmd/billingctl" or
// "go run -C tools ./cmd/billing-sim").
func Parse(name, text string) []Command {
	var out []Command
	fenced, shell, pending, pendingLine := false, false, "", 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if lang, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			fenced, shell = !fenced, !fenced && slices.Contains(shells, strings.TrimSpace(lang))
			continue
		}
		if fenced && !shell {
			continue
		}
		if !fenced {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				if c, ok := command(m[1]); ok {
					c.Source = fmt.Sprintf("%s:%d", name, n)
					out = append(out, c)
				}
			}
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += s + " "
			continue
		}
		if c, ok := command(pending + line); ok {
			c.Source = fmt.Sprintf("%s:%d", name, pendingLine)
			out = append(out, c)
		}
		pending = ""
	}
	return out
}

// command reads one quoted line as a command of a program.
func command(text string) (Command, bool) {
	text = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "$ "))
	if i := strings.Index(text, " #"); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	text = template.ReplaceAllStringFunc(text, func(m string) string {
		if v, ok := Placeholders[template.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
	fields := strings.Fields(text)
	if len(fields) >= 3 && fields[0] == "go" && fields[1] == "run" {
		fields = fields[2:]
		if len(fields) >= 3 && fields[0] == "-C" { // a program of a nested module
			fields = fields[2:]
		}
	}
	if len(fields) < 2 { // a program named alone is a name, not a command
		return Command{}, false
	}
	prog := filepath.Base(fields[0])
	if !slices.Contains(Programs, prog) || (fields[0] != prog && !strings.Contains(fields[0], "/")) {
		return Command{}, false
	}
	args := unquote(fields[1:])
	for i, a := range args {
		if v, ok := Placeholders[a]; ok {
			args[i] = v
		}
	}
	return Command{Program: prog, Args: args, Text: text}, true
}

// unquote drops the shell quotes around whole arguments.
func unquote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) >= 2 && (a[0] == '\'' || a[0] == '"') && a[len(a)-1] == a[0] {
			a = a[1 : len(a)-1]
		}
		out[i] = a
	}
	return out
}

// For returns the commands of one program.
func For(cmds []Command, program string) []Command {
	return slices.DeleteFunc(slices.Clone(cmds), func(c Command) bool { return c.Program != program })
}
