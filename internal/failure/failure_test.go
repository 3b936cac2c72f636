package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name      string
		err       error
		permanent bool
		class     string
	}{
		{"nil", nil, false, ""},
		{"plain is transient", base, false, ""},
		{"permanent", Permanent(ClassConflict, base), true, ClassConflict},
		{"wrapped permanent", fmt.Errorf("batch: %w", Permanent(ClassInvalid, base)), true, ClassInvalid},
		{"joined", errors.Join(base, Permanent(ClassRefused, base)), true, ClassRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.permanent {
				t.Errorf("IsPermanent = %v", got)
			}
			if got := ClassOf(tt.err); got != tt.class {
				t.Errorf("ClassOf = %q", got)
			}
		})
	}
	if Permanent(ClassInvalid, nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if !errors.Is(Permanent(ClassInvalid, base), base) {
		t.Error("Permanent hides the cause")
	}
}
