package hotcache

import (
	"sync"
	"sync/atomic"
	"time"
)

// Breaker states, as exported by the breaker_state gauge.
const (
	stateClosed   = 0
	stateHalfOpen = 1
	stateOpen     = 2
)

// breaker is a circuit breaker in front of Redis. Closed: every call goes
// through; after `failures` consecutive failures it opens. Open: no call goes
// through until openFor has passed; then it is half-open and lets exactly
// one probe through: success closes it, failure opens it again.
type breaker struct {
	failures int
	openFor  time.Duration
	now      func() time.Time
	onState  func(state int)

	state atomic.Int32 // read without the lock on the closed fast path
	fails atomic.Int32 // consecutive failures

	mu       sync.Mutex // serializes state changes; guards the fields below
	openedAt time.Time
	probing  bool
}

// allow reports whether a call may go to Redis now. A true answer in the
// half-open state makes the caller the probe: it must report success or failure.
func (b *breaker) allow() bool {
	if b.state.Load() == stateClosed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case stateClosed:
		return true
	case stateOpen:
		if b.now().Sub(b.openedAt) < b.openFor {
			return false
		}
		b.set(stateHalfOpen)
	}
	if b.probing {
		return false
	}
	b.probing = true
	return true
}

func (b *breaker) success() {
	if b.state.Load() == stateClosed {
		if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails.Store(0)
	b.probing = false
	if b.state.Load() != stateClosed {
		b.set(stateClosed)
	}
}

func (b *breaker) failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.fails.Add(1)
	b.probing = false
	if b.state.Load() == stateHalfOpen || int(n) >= b.failures {
		b.openedAt = b.now()
		if b.state.Load() != stateOpen {
			b.set(stateOpen)
		}
	}
}

// set changes the state; b.mu is held.
func (b *breaker) set(s int) {
	b.state.Store(int32(s))
	if b.onState != nil {
		b.onState(s)
	}
}
