package bench

import (
	"fmt"

	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
)

// snowflakeIDs issues ledger ids from internal/idgen with worker ID 0 and no
// lease: each strategy has a database of its own, so one generator per
// database is enough to keep ids unique.
type snowflakeIDs struct{ g *idgen.Generator }

func newSnowflakeIDs() (ledger.IDSource, error) {
	g, err := idgen.New(0, idgen.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return snowflakeIDs{g: g}, nil
}

func (s snowflakeIDs) NextIDs(dst []int64) error {
	ids := make([]idgen.ID, len(dst))
	if err := s.g.NextIDs(ids); err != nil {
		return err
	}
	for i, id := range ids {
		dst[i] = int64(id)
	}
	return nil
}
