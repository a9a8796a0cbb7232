package hotcache

import (
	"context"
	"errors"
)

// Served tells how a Get was answered.
type Served uint8

const (
	// Fresh: from L1, Redis or the Loader, with no write known to be missed.
	Fresh Served = iota
	// Stale: an older value kept for a failing or refused backend: a hot
	// key's value past its L1 TTL whose reload was refused or failed, or a
	// cold key's last-known value while Redis fails (at most FallbackAge old).
	Stale
	// Fallback: the answer of the WithFallback function.
	Fallback
)

func (s Served) String() string {
	switch s {
	case Fresh:
		return "fresh"
	case Stale:
		return "stale"
	case Fallback:
		return "fallback"
	}
	return "unknown"
}

// Lookup is Get that also tells how the answer was served. A hot key served
// from L1 costs the same as with Get.
func (c *Client) Lookup(ctx context.Context, key string) ([]byte, Served, error) {
	return c.lookup(ctx, key)
}

// withFallback applies the WithFallback function to a refused or unavailable read.
func (c *Client) withFallback(ctx context.Context, key string, data []byte, s Served, err error) ([]byte, Served, error) {
	if err == nil || c.o.fallback == nil || !(errors.Is(err, ErrThrottled) || errors.Is(err, ErrUnavailable)) {
		return data, s, err
	}
	c.m.fallbackAnswers.Inc()
	data, err = c.o.fallback(ctx, key, err)
	return data, Fallback, err
}
