package worker

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/migrate"
)

// schemaPollMax caps the wait between two looks at the schema version.
const schemaPollMax = 2 * time.Second

var errSchemaUnchecked = errors.New("schema: not checked yet")

// schemaGate holds the consumer back until the database schema is one this
// binary runs on (its own, or a newer one reached by additive migrations): a worker started before `billingctl migrate`
// would otherwise fail every event. It never gives up, since a migration or a
// rollout can fix any mismatch, and readiness says what is wrong meanwhile.
type schemaGate struct {
	db  *sql.DB
	log *zap.Logger

	mu  sync.Mutex
	err error // nil once current
}

func newSchemaGate(db *sql.DB, log *zap.Logger) *schemaGate {
	return &schemaGate{db: db, log: log, err: errSchemaUnchecked}
}

// ready is the readiness check: why the worker does not consume yet.
func (s *schemaGate) ready(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait polls the schema version with capped backoff until it is current
// (nil) or ctx ends (ctx's error).
func (s *schemaGate) wait(ctx context.Context) error {
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(schemaPollMax),
		backoff.WithMaxElapsedTime(0),
	)
	return backoff.Retry(func() error { return s.check(ctx) }, backoff.WithContext(bo, ctx))
}

func (s *schemaGate) check(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := migrate.ReadStatus(qctx, s.db)
	if err == nil {
		err = st.Check()
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not news about the schema
	}
	s.mu.Lock()
	prev := s.err
	s.err = err
	s.mu.Unlock()
	if prev != nil && err != nil && prev.Error() == err.Error() {
		return err // logged when it began
	}
	switch {
	case err == nil:
		s.log.Info("database schema is current, consuming", zap.Uint("version", st.Version), zap.Uint("binary_version", st.Latest))
	case errors.Is(err, migrate.ErrBehind):
		s.log.Warn("not consuming until the schema is migrated", zap.Error(err))
	default: // dirty or newer than this binary: a person must act
		s.log.Error("not consuming: the database schema is not this binary's", zap.Error(err))
	}
	return err
}
