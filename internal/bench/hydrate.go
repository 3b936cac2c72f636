package bench

import (
	"context"
	"fmt"
)

const hydrateChunk = 500

// hydrate copies every merchant's balance (credited - debited) from MySQL into
// its Redis quota hash, with ver 0 and no pending fields.
func hydrate(ctx context.Context, env *Env) error {
	rows, err := env.DB.QueryContext(ctx, "SELECT merchant_id, credited - debited FROM merchant_balance")
	if err != nil {
		return fmt.Errorf("bench: read balances: %w", err)
	}
	defer rows.Close()
	pipe := env.Redis.Pipeline()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := pipe.Exec(ctx)
		n = 0
		if err != nil {
			return fmt.Errorf("bench: hydrate redis: %w", err)
		}
		return nil
	}
	for rows.Next() {
		var m string
		var remain int64
		if err := rows.Scan(&m, &remain); err != nil {
			return fmt.Errorf("bench: read balances: %w", err)
		}
		pipe.HSet(ctx, env.Keys.Quota(m), "remain", remain, "ver", 0)
		if n++; n == hydrateChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("bench: read balances: %w", err)
	}
	return flush()
}
