package writepath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/idgen"
)

// Lease leases the worker ID cfg names. A start that finds the ID held by
// another live holder (a pod restarted after a crash finds its own old lease)
// retries for up to two lease TTLs and then fails, naming the holder, rather
// than taking it.
func Lease(ctx context.Context, cfg config.Config, svc *Services, m *idgen.Metrics, log *zap.Logger) (lease *idgen.Lease, err error) {
	holder := Holder(cfg)
	ttl := cfg.IDGen.LeaseTTL
	bo := backoff.WithMaxRetries(backoff.NewConstantBackOff(ttl/3), 6) // two TTLs
	err = backoff.RetryNotify(func() error {
		lease, err = idgen.AcquireLease(ctx, svc.Redis, svc.Keys, cfg.IDGen.WorkerID, holder, log, idgen.LeaseOptions{TTL: ttl, Metrics: m})
		if err != nil && !errors.Is(err, idgen.ErrWorkerHeld) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(bo, ctx), func(err error, _ time.Duration) {
		log.Warn("worker ID held by another holder, waiting for its lease to expire", zap.Error(err))
	})
	if err != nil {
		return nil, err
	}
	log.Info("leased Snowflake worker ID", zap.Int("worker_id", cfg.IDGen.WorkerID), zap.String("source", cfg.IDGen.Source))
	return lease, nil
}

// Holder names this process in a lease: the pod, else host and pid.
func Holder(cfg config.Config) idgen.Holder {
	holder := idgen.Holder{Pod: cfg.IDGen.PodName, IP: cfg.IDGen.PodIP, Since: time.Now().UTC()}
	if holder.Pod == "" {
		host, _ := os.Hostname()
		holder.Pod = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
	}
	return holder
}
