package stepaside

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	after := 5 * time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name    string
		s       State
		now     time.Time
		refused bool
		want    State
		action  Action
	}{
		{"issuing stays", State{}, at(0), false, State{}, Stay},
		{"first refusal starts the run", State{}, at(0), true, State{Since: t0}, Stay},
		{"refusing within the bound stays", State{Since: t0}, at(4 * time.Second), true, State{Since: t0}, Stay},
		{"refusing exactly the bound stays", State{Since: t0}, at(after), true, State{Since: t0}, Stay},
		{"refusing past the bound steps aside", State{Since: t0}, at(after + time.Millisecond), true, State{Since: t0, Aside: true}, StepAside},
		{"aside and still refusing stays aside", State{Since: t0, Aside: true}, at(time.Minute), true, State{Since: t0, Aside: true}, Stay},
		{"a success before the bound ends the run", State{Since: t0}, at(4 * time.Second), false, State{}, Stay},
		{"aside and issuing rejoins", State{Since: t0, Aside: true}, at(time.Minute), false, State{}, Rejoin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, action := Decide(tt.s, tt.now, tt.refused, after)
			if got != tt.want || action != tt.action {
				t.Fatalf("Decide(%+v, %v, %v) = %+v, %v; want %+v, %v", tt.s, tt.now.Sub(t0), tt.refused, got, action, tt.want, tt.action)
			}
		})
	}
}

// A refusal interrupted by one success starts over: a flapping clock is
// not stepped aside for by adding up its refusals.
func TestDecideRunOfRefusals(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	var s State
	var actions []Action
	for i, refused := range []bool{true, true, true, false, true, true, true, true} {
		var a Action
		s, a = Decide(s, t0.Add(time.Duration(i)*time.Second), refused, 2500*time.Millisecond)
		actions = append(actions, a)
	}
	want := []Action{Stay, Stay, Stay, Stay, Stay, Stay, Stay, StepAside}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("actions %v, want %v", actions, want)
		}
	}
}
