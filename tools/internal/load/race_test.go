//go:build race

package load

// raceEnabled: the worker is built with -race too, from the objects this
// test binary was built from (no second compile of the whole tree).
const raceEnabled = true
