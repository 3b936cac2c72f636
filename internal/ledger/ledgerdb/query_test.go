package ledgerdb

import (
	"slices"
	"testing"
)

func TestPow2Chunks(t *testing.T) {
	for _, tc := range []struct {
		n, limit int
		want     []int
	}{
		{0, 1024, nil},
		{1, 1024, []int{1}},
		{100, 1024, []int{64, 32, 4}},
		{1024, 1024, []int{1024}},
		{2500, 1024, []int{1024, 1024, 256, 128, 64, 4}},
		{50, 7, []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2}}, // a limit rounds down to a power of two
		{3, 0, []int{1, 1, 1}},
	} {
		if got := pow2Chunks(tc.n, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("pow2Chunks(%d, %d) = %v, want %v", tc.n, tc.limit, got, tc.want)
		}
	}
}

func TestPadPow2(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"a", "b", "c"}, []string{"a", "b", "c", "c"}},
		{[]string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d", "e", "e", "e", "e"}},
	} {
		if got := padPow2(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("padPow2(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
