//go:build race

package idgen

// raceEnabled: the race detector slows every atomic operation ~10x.
const raceEnabled = true
