package detector

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/rules"
)

// createKafkaTopic creates a topic, waits until every partition is served, and
// deletes it at cleanup.
func createKafkaTopic(t *testing.T, addr, name string, partitions int) {
	t.Helper()
	if _, err := kafkaio.EnsureTopic(t.Context(), []string{addr}, name, partitions); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
		_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{name}})
	})
}

// produceCorpus writes each partition's records to that partition, retrying
// while a new topic's leaders are elected.
func produceCorpus(t *testing.T, addr, topic string, c corpus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for p, values := range c.records {
		msgs := make([]kafka.Message, len(values))
		for i, v := range values {
			msgs[i] = kafka.Message{Value: v}
		}
		for {
			conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
			if err == nil {
				_, err = conn.WriteMessages(msgs...)
				conn.Close()
				if err == nil {
					break
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("produce to %s/%d: %v", topic, p, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// committed returns the group's committed offset per partition.
func committed(t *testing.T, addr, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	cl := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	res, err := cl.OffsetFetch(t.Context(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("offset fetch partition %d: %v", p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// running is a detector running against the real Kafka.
type running struct {
	d    *Detector
	stop func() error
}

// kafkaGroup is where a detector under test reads: a consumer group on one
// topic of the test stack's Kafka.
type kafkaGroup struct{ addr, topic, group string }

// startKafka runs a detector of cfg reading kg through a Source of its own
// (internal/kafkaio's, as hotspotd wires it).
func startKafka(t *testing.T, kg kafkaGroup, cfg Config, sink Sink) running {
	t.Helper()
	src, err := kafkaio.NewSource(kafkaio.GroupConfig{
		Brokers: []string{kg.addr}, Topics: []string{kg.topic}, Group: kg.group,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
		FromOldest: true,
	})
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	cfg.Source, cfg.Takeover = src, src.Takeover()
	cfg.MaxKeyLen = testMaxKeyLen
	cfg.Registerer = prometheus.NewRegistry()
	d, err := New(cfg, sink)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("Run did not return within 30s of cancel")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return running{d, stop}
}

// eventually polls cond every 50ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s: %s", timeout, what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func addSums(a, b map[string]uint64) map[string]uint64 {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

func TestKafkaDeliversCommitsAndFlushesOnCancel(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	createKafkaTopic(t, addr, topic, 4)
	c1 := newCorpus(t, 4, 40, 11)
	produceCorpus(t, addr, topic, c1)

	// Detector A never ticks, and no key reaches its threshold (so none
	// ends a round early): everything it counts is in flight until cancel.
	sinkA := newFakeSink(newFakeTopic(1))
	a := startKafka(t, kafkaGroup{addr, topic, group}, Config{Alpha: -1, MaxAge: -1, Flush: time.Hour,
		Threshold: 1e9}, sinkA)
	eventually(t, 45*time.Second, "detector A counts every record", func() (bool, string) {
		r, e := testutil.ToFloat64(a.d.m.records), testutil.ToFloat64(a.d.m.entries)
		return r == 160 && e == float64(c1.entries), fmt.Sprintf("records %v of 160, entries %v of %d", r, e, c1.entries)
	})
	if n := len(sinkA.callLog()); n != 0 {
		t.Fatalf("%d sends before cancel, want 0", n)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("Run after cancel: %v, want nil", err)
	}
	if diff := diffSums(sinkA.got(), c1.want); diff != "" {
		t.Fatalf("counts flushed at cancel differ: %s", diff)
	}
	checkInvalid(t, a.d, c1.invalid)
	if got, want := committed(t, addr, group, topic, 4), map[int]int64{0: 40, 1: 40, 2: 40, 3: 40}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v after cancel, want %v", got, want)
	}

	// Detector B, same group: reads only what came after A's commits.
	c2 := newCorpus(t, 4, 30, 12)
	produceCorpus(t, addr, topic, c2)
	sinkB := newFakeSink(newFakeTopic(1))
	b := startKafka(t, kafkaGroup{addr, topic, group}, Config{Alpha: -1, MaxAge: -1}, sinkB)
	eventually(t, 45*time.Second, "detector B delivers the new records", func() (bool, string) {
		d := diffSums(sinkB.got(), c2.want)
		return d == "", d
	})
	eventually(t, 10*time.Second, "detector B commits the new records", func() (bool, string) {
		got := committed(t, addr, group, topic, 4)
		return fmt.Sprint(got) == fmt.Sprint(map[int]int64{0: 70, 1: 70, 2: 70, 3: 70}), fmt.Sprint(got)
	})
	if got := testutil.ToFloat64(b.d.m.records); got != 120 {
		t.Fatalf("detector B read %v records, want 120 (none of A's committed ones)", got)
	}
	if err := b.stop(); err != nil {
		t.Fatalf("Run B: %v", err)
	}
	if diff := diffSums(sinkB.got(), c2.want); diff != "" {
		t.Fatalf("detector B delivered more than the new records: %s", diff)
	}
	checkInvalid(t, b.d, c2.invalid)
}

func TestKafkaRebalance(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	createKafkaTopic(t, addr, topic, 4)
	sink := newFakeSink(newFakeTopic(1)) // both detectors hand on to one sink
	kg, cfg := kafkaGroup{addr, topic, group}, Config{Alpha: -1, MaxAge: -1}
	partitions := func(r running) float64 { return testutil.ToFloat64(r.d.m.partitions) }

	a := startKafka(t, kg, cfg, sink)
	eventually(t, 30*time.Second, "A owns all 4 partitions", func() (bool, string) {
		return partitions(a) == 4, fmt.Sprint(partitions(a))
	})
	b := startKafka(t, kg, cfg, sink)
	eventually(t, 45*time.Second, "A and B own 2 partitions each", func() (bool, string) {
		return partitions(a) == 2 && partitions(b) == 2, fmt.Sprintf("A %v, B %v", partitions(a), partitions(b))
	})

	c1 := newCorpus(t, 4, 40, 21)
	produceCorpus(t, addr, topic, c1)
	eventually(t, 30*time.Second, "both deliver the first records", func() (bool, string) {
		d := diffSums(sink.got(), c1.want)
		return d == "", d
	})
	if ra, rb := testutil.ToFloat64(a.d.m.records), testutil.ToFloat64(b.d.m.records); ra != 80 || rb != 80 {
		t.Fatalf("records read: A %v, B %v; want 80 each", ra, rb)
	}

	if err := b.stop(); err != nil {
		t.Fatalf("Run B: %v", err)
	}
	eventually(t, 45*time.Second, "A takes B's partitions", func() (bool, string) {
		return partitions(a) == 4, fmt.Sprint(partitions(a))
	})
	c2 := newCorpus(t, 4, 40, 22)
	produceCorpus(t, addr, topic, c2)
	want := addSums(c1.want, c2.want)
	eventually(t, 30*time.Second, "A delivers the second records", func() (bool, string) {
		d := diffSums(sink.got(), want)
		return d == "", d
	})
	if err := a.stop(); err != nil {
		t.Fatalf("Run A: %v", err)
	}
	if diff := diffSums(sink.got(), want); diff != "" {
		t.Fatalf("after both stopped: %s", diff)
	}
	if got, want := committed(t, addr, group, topic, 4), map[int]int64{0: 80, 1: 80, 2: 80, 3: 80}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
}

// TestKafkaCarriesWritesAndBytes sends JSON events with bytes and op=write
// through the real Kafka: each key's writes, bytes and bytes written reach
// the Sink merged over partitions, and an app's rules lower the filter's
// cutoff for that app only.
func TestKafkaCarriesWritesAndBytes(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	createKafkaTopic(t, addr, topic, 2)
	lines := func(evs ...wire.Event) []byte {
		var b []byte
		for i, ev := range evs {
			if i > 0 {
				b = append(b, '\n')
			}
			b = wire.AppendJSON(b, ev)
		}
		return b
	}

	// Alpha 0.05, Threshold 1000/s, Window 1s, one detector, 2 partitions:
	// 25 accesses per partition; shop's item: rule at 100/s needs 3.
	sink := newFakeSink(newFakeTopic(1))
	r := startKafka(t, kafkaGroup{addr, topic, group}, Config{MaxAge: -1}, sink)
	s, err := rules.Compile(&rules.List{App: "shop", Rules: []rules.Rule{{Match: rules.Prefix, Pattern: "item:", Threshold: 100}}},
		rules.Default(1000, time.Second, 5*time.Second, 0.8))
	if err != nil {
		t.Fatal(err)
	}
	r.d.SetRules("shop", s)
	// Produced after SetRules, so that no record is counted before it.
	produceCorpus(t, addr, topic, corpus{records: [][][]byte{
		{lines(
			wire.Event{App: "shop", Key: "blob:1", Count: 20, Bytes: 81920},
			wire.Event{App: "shop", Key: "blob:1", Count: 10, Bytes: 5000, Op: wire.OpWrite},
			wire.Event{App: "shop", Key: "item:7", Count: 3, Bytes: 30, Op: wire.OpWrite},
			wire.Event{App: "cart", Key: "item:7", Count: 3, Bytes: 30, Op: wire.OpWrite},
		)},
		{lines(wire.Event{App: "shop", Key: "blob:1", Count: 30, Bytes: 3000, Op: wire.OpWrite})},
	}})
	want := map[string]Count{
		"shop/blob:1": {App: "shop", Key: "blob:1", N: 60, Writes: 40, Bytes: 89920, WriteBytes: 8000},
		"shop/item:7": {App: "shop", Key: "item:7", N: 3, Writes: 3, Bytes: 30, WriteBytes: 30},
	}
	eventually(t, 45*time.Second, "the Sink gets the writes and bytes", func() (bool, string) {
		got := sink.totals()
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("got %v, want %v", got, want)
	})
	// cart has no rules: its 3 writes stay under the cutoff of 25 and are
	// dropped when their bucket closes.
	eventually(t, 10*time.Second, "cart's accesses are filtered", func() (bool, string) {
		f := testutil.ToFloat64(r.d.m.filtered)
		return f == 3, fmt.Sprintf("filtered %v, want 3", f)
	})
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.totals(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after stop: got %v, want %v", got, want)
	}
}
