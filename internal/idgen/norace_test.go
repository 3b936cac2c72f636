//go:build !race

package idgen

const raceEnabled = false
