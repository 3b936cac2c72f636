package main

import (
	"context"
	"fmt"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/migrate"
)

const migrateUsage = `billingctl migrate: apply the embedded schema to MYSQL_DSN

  billingctl migrate [--status | --down N | --force VERSION] [--output text|json]

Idempotent. A half-applied (dirty) migration is reported: repair it by hand,
then --force VERSION (it records VERSION as applied and clean, and runs no SQL).
A schema newer than this binary's is left alone when every migration since is
additive (this binary runs on it) and refused otherwise, naming why: migrate
down with the build that migrated it (docs/rollback.md).
Exit codes: 0 done, 1 failed, 2 bad command line or environment.
`

// migrateResult is what migrate prints.
type migrateResult struct {
	Target  string `json:"target"`
	Action  string `json:"action"` // status, forced, reverted, applied, up_to_date
	Version uint   `json:"version"`
	Latest  uint   `json:"latest"`
	Dirty   bool   `json:"dirty"`
	// RunsFrom is the oldest binary schema that runs on Version.
	RunsFrom uint `json:"runs_from"`
}

func (c *ctl) runMigrate(_ context.Context, args []string) error {
	fs := c.flags("migrate", migrateUsage)
	status := fs.Bool("status", false, "print the applied and the latest version, change nothing")
	down := fs.Int("down", 0, "revert the newest N migrations")
	force := fs.Int("force", -1, "mark VERSION applied and clean after repairing a half-applied migration by hand")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(c.getenv)
	if err != nil {
		return err
	}
	m, err := migrate.Open(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer m.Close()
	res := migrateResult{Target: cfg.MySQL.Redacted(), Action: "status"}
	switch {
	case *status:
	case *force >= 0:
		if err := m.Force(*force); err != nil {
			return err
		}
		res.Action = "forced"
	case *down > 0:
		if err := m.Down(*down); err != nil {
			return err
		}
		res.Action = "reverted"
	default:
		changed, err := m.Up()
		if err != nil {
			return err
		}
		res.Action = map[bool]string{true: "applied", false: "up_to_date"}[changed]
	}
	st, err := m.Status()
	if err != nil {
		return err
	}
	res.Version, res.Latest, res.Dirty, res.RunsFrom = st.Version, st.Latest, st.Dirty, st.RunsFrom
	if *output == "json" {
		return writeJSON(c.stdout, res)
	}
	if done, ok := map[string]string{"forced": fmt.Sprintf("forced version %d", *force), "reverted": fmt.Sprintf("reverted %d migration(s)", *down),
		"applied": "applied pending migrations", "up_to_date": "schema already up to date"}[res.Action]; ok {
		fmt.Fprintf(c.stdout, "%s on %s\n", done, res.Target)
	}
	_, err = fmt.Fprintf(c.stdout, "version %d of %d, dirty=%v; binaries of schema %d and later run on it\n", res.Version, res.Latest, res.Dirty, res.RunsFrom)
	return err
}
