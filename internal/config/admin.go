package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Admin is the read API: its own listener, off while Addr is empty.
type Admin struct {
	Addr      string
	TokenFile string  // holds the bearer token; re-read when it changes
	Rate      float64 // requests per second, all callers together
	Burst     int
}

// DefaultAdminRateLimit is ADMIN_RATE_LIMIT's default: requests/s,burst.
const DefaultAdminRateLimit = "10,20"

// MinAdminTokenChars is the shortest token ADMIN_TOKEN_FILE may hold.
const MinAdminTokenChars = 16

func (p *parser) admin() Admin {
	a := Admin{Addr: p.optionalAddr("ADMIN_ADDR"), TokenFile: p.str("ADMIN_TOKEN_FILE", "")}
	a.Rate, a.Burst = p.rateLimit("ADMIN_RATE_LIMIT", DefaultAdminRateLimit)
	switch {
	case a.Addr == "" && p.get("ADMIN_ADDR") != "": // malformed: already reported
	case a.Addr == "":
	case a.TokenFile == "":
		p.fail("ADMIN_TOKEN_FILE", "", "is required when ADMIN_ADDR is set (a file holding the bearer token)")
	default:
		// Read now so a missing or empty file stops the start, not the first request.
		b, err := os.ReadFile(a.TokenFile)
		switch token := strings.TrimSpace(string(b)); {
		case err != nil:
			p.fail("ADMIN_TOKEN_FILE", a.TokenFile, "cannot be read: "+err.Error())
		case len(token) < MinAdminTokenChars:
			p.fail("ADMIN_TOKEN_FILE", a.TokenFile, fmt.Sprintf("holds a token shorter than %d characters", MinAdminTokenChars))
		}
	}
	return a
}

// rateLimit parses "RATE,BURST" (BURST optional: then the rate rounded up).
func (p *parser) rateLimit(name, def string) (float64, int) {
	v := p.str(name, def)
	rs, bs, hasBurst := strings.Cut(v, ",")
	r, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
	if err != nil || r <= 0 || r > 1e6 {
		p.fail(name, v, "is not RATE[,BURST] with RATE requests/s in (0, 10^6]")
		return 10, 20
	}
	burst := max(1, int(r+0.999999))
	if hasBurst {
		if burst, err = strconv.Atoi(strings.TrimSpace(bs)); err != nil || burst < 1 || burst > 1e6 {
			p.fail(name, v, "has a BURST that is not an integer in 1..10^6")
			return r, 1
		}
	}
	return r, burst
}
