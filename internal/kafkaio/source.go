package kafkaio

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/access"
)

// Source is the detector's Kafka input: membership in the consumer group on
// the access topics, as a detector.Source (its methods name package
// access's types, so this package does not import the detector). It joins
// the group on the first Next, not before, so that a member is never in
// the group before its detector runs.
//
// Next and Close are called from one goroutine at a time, as the detector
// does; Close may come before any Next.
type Source struct {
	cfg GroupConfig

	mu     sync.Mutex // guards g and closed
	g      *Group     // nil until the first Next
	closed bool
}

// NewSource checks cfg, without contacting Kafka, and returns a Source of
// the group it describes.
func NewSource(cfg GroupConfig) (*Source, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

// Takeover is how long a member that crashed or froze holds its partitions:
// the group drops it a session timeout after its last heartbeat, so at
// most SessionTimeout less HeartbeatInterval after it last read.
// detector.Config.Takeover takes it.
func (s *Source) Takeover() time.Duration {
	return cmp.Or(s.cfg.SessionTimeout, DefaultSessionTimeout) - cmp.Or(s.cfg.HeartbeatInterval, DefaultHeartbeatInterval)
}

// Next blocks until the group hands this member its next generation, and
// returns ctx.Err() when ctx ends first. The first call joins the group.
func (s *Source) Next(ctx context.Context) (access.Generation, error) {
	g, err := s.group()
	if err != nil {
		return nil, err
	}
	gen, err := g.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return generation{gen}, nil
}

func (s *Source) group() (*Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, errors.New("kafkaio: source closed")
	case s.g == nil:
		g, err := NewGroup(s.cfg)
		if err != nil {
			return nil, err
		}
		s.g = g
	}
	return s.g, nil
}

// Close ends the current generation, waits for the functions started on it
// and leaves the group.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.g == nil {
		return nil
	}
	return s.g.Close()
}

// generation is a Generation as an access.Generation.
type generation struct{ g *Generation }

func (g generation) Claims(from map[access.TopicPartition]int64) []access.Claim {
	as := g.g.Assignments()
	out := make([]access.Claim, len(as))
	for i, a := range as {
		if o, ok := from[access.TopicPartition(a.TopicPartition)]; ok && o > a.Offset {
			a.Offset = o // a.Offset may be kafka.FirstOffset or LastOffset, both negative
		}
		out[i] = claim{g.g.Reader(a)}
	}
	return out
}

func (g generation) Start(fn func(ctx context.Context)) { g.g.Start(fn) }

func (g generation) Commit(ctx context.Context, offsets map[access.TopicPartition]int64) error {
	tps := make(map[TopicPartition]int64, len(offsets))
	for p, o := range offsets {
		tps[TopicPartition(p)] = o
	}
	return g.g.Commit(ctx, tps)
}

// claim is a Reader as an access.Claim.
type claim struct{ r *Reader }

func (c claim) Topic() string  { return c.r.TopicPartition().Topic }
func (c claim) Partition() int { return c.r.TopicPartition().Partition }
func (c claim) Close() error   { return c.r.Close() }

// Fetch returns the reader's next record; an error of a rewound log wraps
// access.ErrRewound too, which is what the detector looks for.
func (c claim) Fetch(ctx context.Context) (access.Record, error) {
	r, err := c.r.Fetch(ctx)
	if errors.Is(err, ErrRewound) {
		err = rewound{err}
	}
	return access.Record{Value: r.Value, Offset: r.Offset, HighWaterMark: r.HighWaterMark, Time: r.Time}, err
}

// rewound is a Reader's error that wraps ErrRewound, wrapping
// access.ErrRewound too; its text is the Reader's.
type rewound struct{ error }

func (e rewound) Unwrap() []error { return []error{e.error, access.ErrRewound} }
