package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/migrate"
)

func runMigrate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", stderr)
	status := fs.Bool("status", false, "print the applied and the latest version, change nothing")
	down := fs.Int("down", 0, "revert the newest N migrations")
	force := fs.Int("force", -1, "mark VERSION applied and clean after repairing a half-applied migration by hand")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	m, err := migrate.Open(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer m.Close()
	target := cfg.MySQL.Redacted()
	switch {
	case *status:
	case *force >= 0:
		if err := m.Force(*force); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "forced version %d on %s\n", *force, target)
	case *down > 0:
		if err := m.Down(*down); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "reverted %d migration(s) on %s\n", *down, target)
	default:
		changed, err := m.Up()
		if err != nil {
			return err
		}
		if changed {
			fmt.Fprintf(stdout, "applied pending migrations on %s\n", target)
		} else {
			fmt.Fprintf(stdout, "schema already up to date on %s\n", target)
		}
	}
	st, err := m.Status()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d of %d, dirty=%v\n", st.Version, st.Latest, st.Dirty)
	return nil
}
