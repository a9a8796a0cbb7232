package aggregator

import "time"

// Add counts n accesses of (app, key) as received now, as a partials body
// entry does.
func (a *Aggregator) Add(app, key string, n uint64) {
	a.AddTally(app, key, n, 0, 0, 0)
}

// AddTally counts n accesses of (app, key) as received now, of which writes
// were writes, moving bytes bytes of which writeBytes were written.
func (a *Aggregator) AddTally(app, key string, n, writes, bytes, writeBytes uint64) {
	now := time.Now()
	a.t.mu.Lock()
	a.t.heard(now)
	a.t.setReach(now)
	hot := a.t.add([]byte(app), []byte(key), tally{n: n, writes: writes, bytes: bytes, writeBytes: writeBytes}, now, span{buckets: 1})
	a.t.mu.Unlock()
	if hot {
		a.wake()
	}
}
