package zkgroup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-zookeeper/zk"
)

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// retrier paces the retries of one loop: exponential backoff from 50ms to
// 2s with +-25% jitter, so that hundreds of watchers that lost the same
// server do not retry in step. The first failure of a streak is logged at
// Warn, the rest at Debug.
type retrier struct {
	s    *Session
	what string // for logs: "watch /hotspot/members/aggregators"
	n    int    // failures in the current streak
}

func (r *retrier) reset() {
	if r.n > 0 {
		r.s.log.Info("zookeeper: recovered", "op", r.what, "failures", r.n)
	}
	r.n = 0
}

// retry handles a failed call: it returns a non-nil error when the loop must
// stop (ctx ended, session closed, or err cannot heal), otherwise it waits
// out the backoff and returns nil.
func (r *retrier) retry(ctx context.Context, err error) error {
	select {
	case <-r.s.closed:
		return ErrSessionClosed
	default:
	}
	if permanent(err) {
		return fmt.Errorf("zkgroup: %s: %w", r.what, err)
	}
	r.s.m.retries.Inc()
	d := min(minBackoff<<min(r.n, 10), maxBackoff)
	d = d*3/4 + rand.N(d/2+1)
	if r.n == 0 {
		r.s.log.Warn("zookeeper call failed; retrying", "op", r.what, "err", err, "in", d)
	} else {
		r.s.log.Debug("zookeeper call failed; retrying", "op", r.what, "err", err, "in", d, "failures", r.n+1)
	}
	r.n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.s.closed:
		return ErrSessionClosed
	case <-t.C:
		return nil
	}
}

// permanent reports errors that retrying cannot fix.
func permanent(err error) bool {
	for _, p := range []error{zk.ErrInvalidPath, zk.ErrNoAuth, zk.ErrAuthFailed, zk.ErrInvalidACL,
		zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals, zk.ErrInvalidFlags} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
