package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// abandonTimeout bounds the clean-up of tokens whose obtain reply was lost.
const abandonTimeout = time.Second

// ObtainMany tries once to take each of the locks at keys for ttl, all in one
// round trip: one script call for every key on a single Redis, a pipeline of
// one call per key on a Cluster (split by node). It returns one entry per key,
// in the order of keys: the Lock, or nil where someone else holds the key.
// Keys must be distinct.
//
// On a Redis error no lock is returned: the tokens of the attempt are released
// at once (best effort; what that misses expires with ttl).
func (c *Client) ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*Lock, error) {
	locks, err := c.tryMany(ctx, keys, ttl)
	for _, l := range locks {
		res := resultObtained
		if l == nil {
			res = resultNotObtained
		}
		c.opts.Metrics.obtain.WithLabelValues(modeTry, res).Inc()
	}
	if err != nil {
		c.opts.Metrics.obtain.WithLabelValues(modeTry, resultError).Add(float64(len(keys)))
	}
	return locks, err
}

// WaitMany takes every lock at keys for ttl, in the order of keys, waiting
// while others hold some, until ctx ends. It returns the locks in the order of
// keys, or an error and holds none of them (those taken are released). Keys
// must be distinct.
//
// Callers that list overlapping keys in one global order (sorted, say) never
// wait for one another in a cycle, whether they use WaitMany or Wait one key
// after another in that order: WaitMany tries all the keys that remain in one
// round trip, keeps the prefix it obtained, releases what it obtained beyond
// the first key held by someone else, waits for that key (as Wait does), and
// goes on with the keys after it. So it only ever waits for a key that comes
// after every key it holds. Uncontended, it costs one round trip for any
// number of keys.
//
// Metrics count every key as a wait, with the result and duration of the
// whole call. When ctx ends the error is both ErrNotObtained and ctx.Err().
func (c *Client) WaitMany(ctx context.Context, keys []string, ttl time.Duration) ([]*Lock, error) {
	start := time.Now()
	locks, err := c.waitMany(ctx, keys, ttl)
	res := resultOf(err)
	c.opts.Metrics.obtain.WithLabelValues(modeWait, res).Add(float64(len(keys)))
	c.opts.Metrics.wait.WithLabelValues(res).Observe(time.Since(start).Seconds())
	return locks, err
}

func (c *Client) waitMany(ctx context.Context, keys []string, ttl time.Duration) (_ []*Lock, err error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	out := make([]*Lock, 0, len(keys))
	defer func() {
		if err != nil {
			c.releaseQuietly(ctx, out)
		}
	}()
	for len(out) < len(keys) {
		rest := keys[len(out):]
		got, err := c.tryMany(ctx, rest, ttl)
		if err != nil {
			return nil, giveUp(ctx, err)
		}
		first := slices.Index(got, nil) // the first key someone else holds
		if first < 0 {
			return append(out, got...), nil
		}
		out = append(out, got[:first]...)
		// Holding a key that comes after the one we wait for could close a cycle.
		c.releaseQuietly(ctx, got[first+1:])
		l, err := c.waitHeld(ctx, rest[first], ttl)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// ReleaseMany releases every lock as Release does, with one round trip for
// all of them, as ObtainMany takes them (nil entries are skipped). Every lock
// that can be released is; the error sums up the failures: ErrNotHeld, naming
// the first such key, for locks that were not ours (nothing deleted), Redis
// errors for locks that may still be held (they are no longer renewed, so
// they expire within their TTL; Release may be retried). The locks must come
// from c.
func (c *Client) ReleaseMany(ctx context.Context, locks []*Lock) error {
	var errs []error
	var notHeld []string
	live := make([]*Lock, 0, len(locks))
	var dogs []*watchdog
	for _, l := range locks {
		if l == nil {
			continue
		}
		if l.client != c {
			errs = append(errs, fmt.Errorf("lock: release %s: lock of another client", l.key))
			continue
		}
		ldogs, ok := l.beginRelease()
		if !ok {
			notHeld = append(notHeld, l.key)
			continue
		}
		live = append(live, l)
		dogs = append(dogs, ldogs...)
	}
	for _, dog := range dogs {
		<-dog.done
	}
	keys := make([]string, len(live))
	tokens := make([]string, len(live))
	for i, l := range live {
		keys[i], tokens[i] = l.key, l.token
	}
	var rerrs []error
	if len(live) > 0 {
		var replies []int64
		replies, rerrs = c.releaseKeys(ctx, keys, tokens)
		for i, l := range live {
			if err := l.endRelease(replies[i], rerrs[i]); errors.Is(err, ErrNotHeld) {
				notHeld = append(notHeld, l.key)
			}
		}
	}
	switch len(notHeld) {
	case 0:
	case 1:
		errs = append(errs, fmt.Errorf("lock: release %s: %w", notHeld[0], ErrNotHeld))
	default:
		errs = append(errs, fmt.Errorf("lock: release %s and %d more: %w", notHeld[0], len(notHeld)-1, ErrNotHeld))
	}
	return errors.Join(append(errs, keyErrors("release", keys, rerrs))...)
}

// releaseQuietly releases the locks, even after ctx ended, and logs failures:
// the locks expire by their TTL anyway.
func (c *Client) releaseQuietly(ctx context.Context, locks []*Lock) {
	if !slices.ContainsFunc(locks, func(l *Lock) bool { return l != nil }) {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if err := c.ReleaseMany(rctx, locks); err != nil {
		c.opts.Logger.Warn("release locks", zap.Error(err))
	}
}

// tryMany is one round trip of the obtain script (see perKey), with a fresh
// token per key. On any error it returns no lock and releases every token it
// sent.
func (c *Client) tryMany(ctx context.Context, keys []string, ttl time.Duration) ([]*Lock, error) {
	select {
	case <-c.notify.stop:
		return nil, ErrClosed
	default:
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	tokens := make([]string, len(keys))
	one := make([][]any, len(keys))
	many := make([]any, 1, 1+len(keys))
	many[0] = ttl.Milliseconds()
	for i := range keys {
		token, err := newToken()
		if err != nil {
			return nil, err
		}
		tokens[i], one[i] = token, []any{token, ttl.Milliseconds()}
		many = append(many, token)
	}
	sent := time.Now()
	octx, cancel := context.WithDeadline(ctx, expiry(ttl, sent))
	defer cancel()
	replies, rerrs := c.perKey(octx, c.scripts.obtain, c.scripts.obtainMany, keys, one, many)
	if err := keyErrors("obtain", keys, rerrs); err != nil {
		// A call whose reply was lost may have set its key: delete every
		// token of this attempt that is still there.
		c.abandon(ctx, keys, tokens)
		return nil, err
	}
	locks := make([]*Lock, len(keys))
	for i, ok := range replies {
		if ok == 1 {
			locks[i] = newLock(c, keys[i], tokens[i], ttl, sent)
		}
	}
	return locks, nil
}

// abandon deletes the keys that still hold the given tokens.
func (c *Client) abandon(ctx context.Context, keys, tokens []string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	_, errs := c.releaseKeys(rctx, keys, tokens)
	if err := keyErrors("release", keys, errs); err != nil {
		c.opts.Logger.Warn("release abandoned lock tokens", zap.Error(err))
	}
}

// releaseKeys runs the release script for every key whose value is its token.
func (c *Client) releaseKeys(ctx context.Context, keys, tokens []string) ([]int64, []error) {
	one := make([][]any, len(keys))
	many := make([]any, 0, 2*len(keys))
	for i, key := range keys {
		ch := c.keys.LockChannel(key)
		one[i] = []any{tokens[i], ch}
		many = append(many, tokens[i], ch)
	}
	return c.perKey(ctx, c.scripts.release, c.scripts.releaseMany, keys, one, many)
}

// checkKeys refuses an empty key and a key listed twice (which would wait for itself).
func checkKeys(keys []string) error {
	seen := make(map[string]struct{}, len(keys))
	for _, key := range keys {
		if key == "" {
			return errors.New("lock: empty key")
		}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("lock: key %s listed twice", key)
		}
		seen[key] = struct{}{}
	}
	return nil
}

// keyErrors sums up the failures of a per-key operation: nil when there is
// none, else one error naming how many keys failed and the first of them,
// wrapping each distinct cause once (one failed call fails every key).
func keyErrors(op string, keys []string, errs []error) error {
	var causes []error
	first, n := "", 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		if n == 0 {
			first = keys[i]
		}
		n++
		if !slices.ContainsFunc(causes, func(c error) bool { return c == err || c.Error() == err.Error() }) {
			causes = append(causes, err)
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("lock: %s %s (%d of %d keys failed): %w", op, first, n, len(keys), errors.Join(causes...))
}
