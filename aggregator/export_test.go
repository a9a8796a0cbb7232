package aggregator

import "time"

// Add counts n accesses of (app, key) as received now, as a partials body
// entry does.
func (a *Aggregator) Add(app, key string, n uint64) {
	now := time.Now()
	a.t.mu.Lock()
	a.t.heard(now)
	a.t.setReach(now)
	hot := a.t.add([]byte(app), []byte(key), tally{n: n}, now, span{buckets: 1})
	a.t.mu.Unlock()
	if hot {
		a.wake()
	}
}
