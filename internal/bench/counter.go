package bench

import "sync/atomic"

// counter is a named count a strategy reports (see Counters).
type counter struct{ n atomic.Int64 }

func (c *counter) inc()        { c.n.Add(1) }
func (c *counter) load() int64 { return c.n.Load() }
func (c *counter) add(d int64) { c.n.Add(d) }
