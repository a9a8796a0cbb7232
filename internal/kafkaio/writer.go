package kafkaio

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	metaapi "github.com/segmentio/kafka-go/protocol/metadata"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
)

// How kafka-go's Writer (v0.4.51) gets a batch across a partition leader
// change. It retries a failed batch, MaxAttempts attempts in all, sleeping
// attempt²·WriteBackoffMin, at most WriteBackoffMax, before retry number
// attempt, as long as the error is temporary: NotLeaderForPartition,
// LeaderNotAvailable, NotEnoughReplicas, RequestTimedOut, a timeout, a
// refused or reset connection, among others. No error makes it look the
// leader up again: its kafka.Transport refreshes the cached cluster layout on
// a timer only, after a random time below its MetadataTTL (6 s by default),
// and sends a partition's batches to the leader it last learned until then.
// So a batch caught by a broker's death went on being sent to the dead
// broker for up to that long after the partition had a new leader.
//
// Transport closes that gap: a Writer over WriterTransport learns a new
// leader at its next attempt once a request has failed (a broker that does
// not answer, one that says it does not lead the partition, or a layout
// that names no leader for it all fail the request), and within
// WriterMetadataTTL in any case.

// WriterMetadataTTL is the longest a WriterTransport keeps the cluster
// layout without asking again. Leader changes are followed by the renewal
// after a failed request, not by this timer, so it only bounds how late a
// Writer learns what no request of its own fails on: partitions added to
// its topic, brokers added to the cluster. kafka-go refreshes at a random
// time below it, so each Writer sends 2/WriterMetadataTTL Metadata
// requests per second on average: 0.2 (it was 2 s, 1 per second per app
// instance beside its 10 produce requests; BENCHMARKS.md, P8).
const WriterMetadataTTL = 10 * time.Second

// renewEvery bounds how often a Transport starts afresh: while a broker is
// down every attempt may fail, and each renewal costs one metadata request.
// renewTimeout bounds a fresh kafka.Transport's first metadata request.
const (
	renewEvery   = 100 * time.Millisecond
	renewTimeout = 2 * time.Second
)

// Transport is a kafka.RoundTripper for a Writer, over kafka.Transports it
// makes with mk. Once a request has failed (no answer: a refused or reset
// connection, a timeout) or a broker has answered a produce request that it
// does not lead the partition, the next produce request first makes a fresh
// kafka.Transport and has it ask for the cluster layout (at most once per
// renewEvery), so the Writer's next attempt goes to the partition's leader
// as the cluster knows it then. A fresh one that cannot learn the layout is
// dropped and the current one, which keeps the last layout it learned,
// stays. A replaced one closes its connections once its requests in flight
// are done.
//
// Only a produce request waits for a renewal: those are sent from the
// Writer's own goroutines, by an attempt that is retrying anyway. Every other
// request is the Writer's lookup of the topic's partitions, made by
// WriteMessages on its caller's goroutine (the load generator's loop, the
// SDK's flusher) and answered from the cached layout: a renewal is a
// metadata round trip, which took up to 0.7 s on the loaded test machine
// with a broker restarting, and the caller must not wait for it.
type Transport struct {
	mk func() *kafka.Transport

	mu       sync.Mutex
	cur      *inner
	stale    bool      // a request failed since cur learned the layout
	renewed  time.Time // when the last renewal started
	renewing bool
}

// inner is one kafka.Transport of a Transport and its requests in flight.
type inner struct {
	tr      *kafka.Transport
	refs    int
	retired bool
}

// NewTransport returns a Transport over the kafka.Transports mk makes: one
// now, and a fresh one at each renewal.
func NewTransport(mk func() *kafka.Transport) *Transport {
	return &Transport{mk: mk, cur: &inner{tr: mk()}}
}

// WriterTransport returns a Transport for a Writer of topic, with s's TLS and
// SASL (s may be nil). Its kafka.Transports ask for the metadata of topic
// alone (a small request, however many topics the cluster holds), at random
// times at most WriterMetadataTTL apart and at each renewal. A Transport of
// its own also learns a topic created after another client of the process
// asked about it, which kafka-go's shared default one would not for up to
// 6 s.
func (s *Security) WriterTransport(topic string) *Transport {
	return NewTransport(func() *kafka.Transport {
		t := &kafka.Transport{MetadataTTL: WriterMetadataTTL, MetadataTopics: []string{topic}}
		if s != nil {
			t.TLS, t.SASL = s.TLS, s.SASL
		}
		return t
	})
}

// RoundTrip sends req over the current kafka.Transport, renewing it first,
// if req is a produce request, when a request failed since it learned the
// layout (see Transport).
func (t *Transport) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	_, produce := req.(*produceapi.Request)
	t.mu.Lock()
	renew := produce && t.stale && !t.renewing && time.Since(t.renewed) >= renewEvery
	if renew {
		t.renewing, t.renewed = true, time.Now()
	}
	t.mu.Unlock()
	if renew {
		t.renew(addr)
	}
	t.mu.Lock()
	g := t.cur
	g.refs++
	t.mu.Unlock()
	res, err := g.tr.RoundTrip(ctx, addr, req)
	t.mu.Lock()
	g.refs--
	done := g.retired && g.refs == 0
	if (err != nil && ctx.Err() == nil || leaderMoved(res)) && g == t.cur {
		t.stale = true
	}
	t.mu.Unlock()
	if done {
		g.tr.CloseIdleConnections()
	}
	return res, err
}

// renew makes a fresh kafka.Transport and, once it has learned the cluster
// layout from addr, makes it the current one.
func (t *Transport) renew(addr net.Addr) {
	fresh := t.mk()
	ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
	_, err := fresh.RoundTrip(ctx, addr, &metaapi.Request{}) // answered from its first metadata response
	cancel()
	t.mu.Lock()
	t.renewing = false
	old := t.cur
	if err == nil {
		t.cur, t.stale = &inner{tr: fresh}, false
		old.retired = true
	}
	done := err == nil && old.refs == 0
	t.mu.Unlock()
	switch {
	case err != nil:
		fresh.CloseIdleConnections()
	case done:
		old.tr.CloseIdleConnections()
	}
}

// leaderMoved reports whether res is a produce response in which a broker
// says it does not lead a partition, or that the partition has no leader.
func leaderMoved(res kafka.Response) bool {
	r, ok := res.(*produceapi.Response)
	if !ok {
		return false
	}
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			switch kafka.Error(p.ErrorCode) {
			case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.FencedLeaderEpoch,
				kafka.UnknownLeaderEpoch:
				return true
			}
		}
	}
	return false
}

// CloseIdleConnections closes the idle connections of the current
// kafka.Transport (kafka.Transport.CloseIdleConnections), as a client does
// when it is done.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	g := t.cur
	t.mu.Unlock()
	g.tr.CloseIdleConnections()
}
