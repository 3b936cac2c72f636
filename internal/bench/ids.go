package bench

import (
	"fmt"

	"github.com/quotaflow/billing/internal/idgen"
)

// IDSource issues ledger primary keys, one at a time or a batch at once (as
// ledger.IDSource). The bench runs one source per database.
type IDSource interface {
	NextID() (int64, error)
	NextIDs(dst []int64) error
}

// snowflakeIDs issues ids from internal/idgen with a fixed worker ID and no
// lease: each strategy has a database of its own, so one generator per
// database is enough to keep ids unique.
type snowflakeIDs struct{ g *idgen.Generator }

// NewSnowflakeIDs returns an IDSource backed by idgen with workerID and no lease.
func NewSnowflakeIDs(workerID int) (IDSource, error) {
	g, err := idgen.New(workerID, idgen.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return snowflakeIDs{g: g}, nil
}

func (s snowflakeIDs) NextID() (int64, error) {
	id, err := s.g.NextID()
	return int64(id), err
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
