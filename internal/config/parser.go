package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// parser reads variables and collects every problem instead of stopping at the first.
type parser struct {
	getenv func(string) string
	errs   []error
	read   []string // names read, in order; the tests hold it against Variables()
}

// FieldError names the variable and the value that broke the contract.
type FieldError struct {
	Var, Value, Problem string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return e.Var + " " + e.Problem
	}
	return fmt.Sprintf("%s=%q %s", e.Var, e.Value, e.Problem)
}

func (p *parser) get(name string) string {
	p.read = append(p.read, name)
	return strings.TrimSpace(p.getenv(name))
}

func (p *parser) fail(name, value, problem string) {
	p.errs = append(p.errs, &FieldError{Var: name, Value: value, Problem: problem})
}

func (p *parser) str(name, def string) string {
	if v := p.get(name); v != "" {
		return v
	}
	return def
}

func (p *parser) boolean(name string, def bool) bool {
	v := p.get(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, "is not a boolean (true/false)")
		return def
	}
	return b
}

func (p *parser) integer(name string, def, min, max int) int {
	return ranged(p, name, def, min, max, strconv.Atoi, "an integer")
}

func (p *parser) duration(name string, def, min, max time.Duration) time.Duration {
	return ranged(p, name, def, min, max, time.ParseDuration, "a duration (e.g. 30s, 500ms, 2m)")
}

func ranged[T int | time.Duration](p *parser, name string, def, min, max T, parse func(string) (T, error), what string) T {
	v := p.get(name)
	if v == "" {
		return def
	}
	n, err := parse(v)
	if err != nil {
		p.fail(name, v, "is not "+what)
		return def
	}
	if n < min || n > max {
		p.fail(name, v, fmt.Sprintf("is outside %v..%v", min, max))
		return def
	}
	return n
}

func (p *parser) oneOf(name, def string, allowed ...string) string {
	v := strings.ToLower(p.get(name))
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, v, "is not one of "+strings.Join(allowed, ", "))
	return def
}

func (p *parser) addr(name, def string) string {
	v := p.str(name, def)
	if err := checkHostPort(v); err != nil {
		p.fail(name, v, err.Error())
	}
	return v
}

// optionalAddr is an address that may be empty (the feature is off).
func (p *parser) optionalAddr(name string) string {
	if p.str(name, "") == "" {
		return ""
	}
	return p.addr(name, "")
}

func (p *parser) addrList(name, def string) []string {
	raw := p.str(name, def)
	var list []string
	for _, a := range strings.Split(raw, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a); err != nil {
			p.fail(name, raw, fmt.Sprintf("entry %q: %v", a, err))
		}
		list = append(list, a)
	}
	return list
}

func checkHostPort(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("is not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("has a bad port")
	}
	return nil
}
