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

// AdminToken is the bearer token of a token file's content b, without the
// white space around it, or an error if it is shorter than MinAdminTokenChars
// (empty too). The one rule for the token: Load applies it at start, the read
// API at every re-read of a rotated file.
func AdminToken(b []byte) (string, error) {
	token := strings.TrimSpace(string(b))
	if len(token) < MinAdminTokenChars {
		return "", fmt.Errorf("holds a token shorter than %d characters", MinAdminTokenChars)
	}
	return token, nil
}

func (p *parser) admin() Admin {
	a := Admin{Addr: p.optionalAddr("ADMIN_ADDR"), TokenFile: p.str("ADMIN_TOKEN_FILE", "")}
	a.Rate, a.Burst = p.rateLimit("ADMIN_RATE_LIMIT", DefaultAdminRateLimit)
	switch {
	case a.Addr == "" && p.get("ADMIN_ADDR") != "": // malformed: already reported
	case a.Addr == "":
	case a.TokenFile == "":
		p.fail("ADMIN_TOKEN_FILE", "", "is required when ADMIN_ADDR is set (a file holding the bearer token)")
	default:
		// Read now so a missing or short token stops the start, not the first request.
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			p.fail("ADMIN_TOKEN_FILE", a.TokenFile, "cannot be read: "+err.Error())
		} else if _, err := AdminToken(b); err != nil {
			p.fail("ADMIN_TOKEN_FILE", a.TokenFile, err.Error())
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
