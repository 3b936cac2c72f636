package adminapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
)

// tokenFile is the bearer token of a file, re-read whenever the file changes
// (its identity, size or modification time), checked at each request: a
// rotated Kubernetes Secret takes effect without restarting the worker, which
// would cost its consumer group a rebalance. A file that cannot be read or
// holds no token config.AdminToken accepts (an empty or short one)
// refuses every request until it is fixed.
type tokenFile struct {
	path string
	log  *zap.Logger

	mu   sync.Mutex
	stat os.FileInfo // of the file the token was read from; nil: none read
	sum  [sha256.Size]byte
	ok   bool // sum is of a usable token
}

func newTokenFile(path string, log *zap.Logger) (*tokenFile, error) {
	f := &tokenFile{path: path, log: log}
	if err := f.reload(); err != nil {
		return nil, fmt.Errorf("adminapi: token file: %w", err)
	}
	return f, nil
}

// reload reads the file; called with mu held (or before sharing).
func (f *tokenFile) reload() error {
	f.ok, f.stat = false, nil
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	f.stat = st
	token, err := config.AdminToken(b)
	if err != nil {
		return fmt.Errorf("%s %w", f.path, err)
	}
	f.sum, f.ok = sha256.Sum256([]byte(token)), true
	return nil
}

// matches reports whether presented is the file's current token. Both sides
// are hashed first, so the comparison's time depends on neither's length.
func (f *tokenFile) matches(presented string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, err := os.Stat(f.path); err != nil || f.stat == nil || !os.SameFile(st, f.stat) ||
		st.Size() != f.stat.Size() || !st.ModTime().Equal(f.stat.ModTime()) {
		wasOK := f.ok
		if err := f.reload(); err != nil {
			if wasOK { // said once per breakage, not per request
				f.log.Error("read API token file unusable: every request is refused until it is fixed", zap.Error(err))
			}
		} else {
			f.log.Info("read API token file re-read", zap.String("path", f.path))
		}
	}
	p := sha256.Sum256([]byte(presented))
	return f.ok && subtle.ConstantTimeCompare(p[:], f.sum[:]) == 1
}

// authorized answers 401 unless the request carries the token.
func (a *API) authorized(w http.ResponseWriter, r *http.Request) bool {
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		w.Header().Set("WWW-Authenticate", `Bearer realm="billing"`)
		writeError(w, http.StatusUnauthorized, "a bearer token is required")
		return false
	}
	if !a.token.matches(strings.TrimSpace(token)) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="billing", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "the bearer token is not valid")
		return false
	}
	return true
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
