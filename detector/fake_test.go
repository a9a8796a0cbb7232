package detector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// fakeTopicName is the name of every fakeTopic.
const fakeTopicName = "access"

// fakeTopic is an in-memory partitioned log with committed offsets: a
// stand-in for Kafka with the same replay semantics.
type fakeTopic struct {
	mu        sync.Mutex
	logs      [][][]byte
	changed   chan struct{} // closed and replaced on every append
	committed map[int]int64
	events    []string // "send", "commit p=o ...", "close": the order things happened in
	commitErr error
}

func newFakeTopic(partitions int) *fakeTopic {
	return &fakeTopic{logs: make([][][]byte, partitions), changed: make(chan struct{}), committed: map[int]int64{}}
}

func (t *fakeTopic) append(p int, vals ...[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs[p] = append(t.logs[p], vals...)
	close(t.changed)
	t.changed = make(chan struct{})
}

// replace replaces partition p's log with a new one holding vals: the
// topic deleted and created again. A claim whose position is past the new
// log's end moves to its start, as kafkaio's reader does.
func (t *fakeTopic) replace(p int, vals ...[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs[p] = slices.Clone(vals)
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *fakeTopic) event(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, s)
}

func (t *fakeTopic) eventLog() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.events)
}

func (t *fakeTopic) commits() map[int]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.committed)
}

// fakeSource hands out the generations the test pushes, one at a time.
type fakeSource struct {
	topic *fakeTopic
	gens  chan *fakeGen

	mu     sync.Mutex
	cur    *fakeGen
	closed bool
}

func newFakeSource(t *fakeTopic) *fakeSource {
	return &fakeSource{topic: t, gens: make(chan *fakeGen, 4)}
}

// assign queues a generation that owns the given partitions.
func (s *fakeSource) assign(parts ...int) *fakeGen {
	ctx, cancel := context.WithCancel(context.Background())
	g := &fakeGen{topic: s.topic, parts: parts, ctx: ctx, cancel: cancel}
	s.gens <- g
	return g
}

func (s *fakeSource) Next(ctx context.Context) (Generation, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case g := <-s.gens:
		s.mu.Lock()
		prev := s.cur
		s.cur = g
		s.mu.Unlock()
		if prev != nil {
			prev.end() // like kafka-go: the previous generation is over first
		}
		return g, nil
	}
}

func (s *fakeSource) Close() error {
	s.mu.Lock()
	g := s.cur
	s.closed = true
	s.mu.Unlock()
	if g != nil {
		g.end()
	}
	s.topic.event("close")
	return nil
}

type fakeGen struct {
	topic  *fakeTopic
	parts  []int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (g *fakeGen) Claims(from map[TopicPartition]int64) []Claim {
	out := make([]Claim, len(g.parts))
	for i, p := range g.parts {
		g.topic.mu.Lock()
		out[i] = &fakeClaim{topic: g.topic, part: p, off: max(g.topic.committed[p], from[TopicPartition{Topic: fakeTopicName, Partition: p}])}
		g.topic.mu.Unlock()
	}
	return out
}

// Start has kafka-go's semantics: the generation ends when any fn returns.
func (g *fakeGen) Start(fn func(ctx context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn(g.ctx)
		g.cancel()
	}()
}

func (g *fakeGen) Commit(_ context.Context, offsets map[TopicPartition]int64) error {
	g.topic.mu.Lock()
	defer g.topic.mu.Unlock()
	if g.topic.commitErr != nil {
		return g.topic.commitErr
	}
	var b strings.Builder
	b.WriteString("commit")
	parts := make(map[int]int64, len(offsets))
	for tp, o := range offsets {
		if tp.Topic != fakeTopicName {
			return fmt.Errorf("fakeGen: commit of topic %q", tp.Topic)
		}
		parts[tp.Partition] = o
	}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		fmt.Fprintf(&b, " %d=%d", p, parts[p])
		g.topic.committed[p] = parts[p]
	}
	g.topic.events = append(g.topic.events, b.String())
	return nil
}

// end ends the generation (a rebalance) and waits for its functions.
func (g *fakeGen) end() {
	g.cancel()
	g.wg.Wait()
}

type fakeClaim struct {
	topic *fakeTopic
	part  int
	off   int64
}

func (c *fakeClaim) Topic() string  { return fakeTopicName }
func (c *fakeClaim) Partition() int { return c.part }
func (c *fakeClaim) Close() error   { return nil }

func (c *fakeClaim) Fetch(ctx context.Context) (Record, error) {
	for {
		c.topic.mu.Lock()
		log := c.topic.logs[c.part]
		if c.off > int64(len(log)) {
			c.off = 0
			c.topic.mu.Unlock()
			return Record{}, fmt.Errorf("fakeClaim: %w", ErrRewound)
		}
		if c.off < int64(len(log)) {
			r := Record{Value: log[c.off], Offset: c.off, HighWaterMark: int64(len(log))}
			c.off++
			c.topic.mu.Unlock()
			return r, nil
		}
		ch := c.topic.changed
		c.topic.mu.Unlock()
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case <-ch:
		}
	}
}

// fakeSink records what it is sent; fail, if set, decides each call's error.
type fakeSink struct {
	topic *fakeTopic

	mu      sync.Mutex
	sums    map[string]uint64 // "app/key" -> N
	calls   [][]Count
	spans   []time.Duration // span of each recorded call
	flushes []Flush         // Flush of each recorded call
	empty   int             // liveness rounds (no counts)
	fail    func(call int) error
}

func newFakeSink(t *fakeTopic) *fakeSink { return &fakeSink{topic: t, sums: map[string]uint64{}} }

func (s *fakeSink) Send(_ context.Context, f Flush, counts []Count) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(counts) == 0 {
		s.empty++ // a liveness round: nothing to record or commit
		return nil
	}
	s.calls = append(s.calls, slices.Clone(counts))
	s.spans = append(s.spans, f.Span)
	f.Weights = slices.Clone(f.Weights) // reused after Send returns, as counts are
	f.Sources, f.Effects, f.Instances = slices.Clone(f.Sources), slices.Clone(f.Effects), slices.Clone(f.Instances)
	s.flushes = append(s.flushes, f)
	if s.fail != nil {
		if err := s.fail(len(s.calls)); err != nil {
			s.topic.event("send-failed")
			return err
		}
	}
	seen := map[string]bool{}
	for _, c := range counts {
		k := c.App + "/" + c.Key
		if seen[k] {
			return errors.New("fakeSink: key twice in one Send: " + k)
		}
		seen[k] = true
		s.sums[k] += c.N
	}
	s.topic.event("send")
	return nil
}

func (s *fakeSink) got() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.sums)
}

func (s *fakeSink) callLog() [][]Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// totals returns every Count sent so far summed per app and key ("app/key").
func (s *fakeSink) totals() map[string]Count {
	got := map[string]Count{}
	for _, call := range s.callLog() {
		for _, c := range call {
			k := c.App + "/" + c.Key
			g := got[k]
			g.App, g.Key = c.App, c.Key
			g.N += c.N
			g.Writes += c.Writes
			g.Bytes += c.Bytes
			g.WriteBytes += c.WriteBytes
			got[k] = g
		}
	}
	return got
}
