package ledger

import (
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// idSourceKey is where WithIDs leaves an IDSource on a GORM session.
const idSourceKey = "ledger:id_source"

// WithIDs returns a session on db whose Row creations without an id take one
// from ids (BeforeCreate): for plain GORM inserts; the Store skips hooks.
func WithIDs(db *gorm.DB, ids IDSource) *gorm.DB {
	return db.Set(idSourceKey, ids)
}

// BeforeCreate fills a zero ID from the session's IDSource, or refuses the
// row: an auto-increment key would break the reconciler's Snowflake order.
func (r *Row) BeforeCreate(tx *gorm.DB) error {
	if r.ID != 0 {
		return nil
	}
	v, ok := tx.Get(idSourceKey)
	ids, isSource := v.(IDSource)
	if !ok || !isSource {
		return errors.New("ledger: row without an id and no IDSource on the session (use ledger.WithIDs)")
	}
	var one [1]int64
	if err := ids.NextIDs(one[:]); err != nil {
		return fmt.Errorf("ledger: row id: %w", err)
	}
	r.ID = one[0]
	return nil
}
