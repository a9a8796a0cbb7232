package kafkaio

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// createTopic creates a topic, waits until every partition is served, and
// deletes it at cleanup.
func createTopic(t *testing.T, addr, name string, partitions int) {
	t.Helper()
	if _, err := EnsureTopic(t.Context(), []string{addr}, name, partitions); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
		_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{name}})
	})
}

// produce writes values to one partition, retrying while the new topic's
// leader is being elected.
func produce(t *testing.T, addr, topic string, partition int, values ...[]byte) {
	t.Helper()
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Value: v}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, partition)
		if err == nil {
			_, err = conn.WriteMessages(msgs...)
			conn.Close()
			if err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func testConfig(addr, topic, group string) GroupConfig {
	return GroupConfig{
		Brokers: []string{addr}, Topics: []string{topic}, Group: group,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
		FromOldest: true,
	}
}

// TestGroupReadsAndCommits: one group on two topics (2 partitions and 1)
// reads every partition of both and commits them in one request.
func TestGroupReadsAndCommits(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	other := topic + ".other"
	createTopic(t, addr, topic, 2)
	createTopic(t, addr, other, 1)
	value := func(a TopicPartition, i int) string {
		return fmt.Sprintf("%s/%d-%d", a.Topic[len(topic):], a.Partition, i)
	}
	for _, tp := range []TopicPartition{{topic, 0}, {topic, 1}, {other, 0}} {
		produce(t, addr, tp.Topic, tp.Partition, []byte(value(tp, 0)), []byte(value(tp, 1)), []byte(value(tp, 2)))
	}
	byTopicPartition := func(a, b Assignment) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), a.Partition-b.Partition)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	reg := prometheus.NewRegistry()
	cfg := testConfig(addr, topic, group)
	cfg.Topics = append(cfg.Topics, other)
	cfg.Registerer = reg
	g, err := NewGroup(cfg)
	if err != nil {
		t.Fatalf("NewGroup: %v", err)
	}
	gen, err := g.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	as := gen.Assignments()
	slices.SortFunc(as, byTopicPartition)
	if want := []Assignment{{TopicPartition{topic, 0}, kafka.FirstOffset}, {TopicPartition{topic, 1}, kafka.FirstOffset},
		{TopicPartition{other, 0}, kafka.FirstOffset}}; !slices.Equal(as, want) {
		t.Fatalf("assignments %v, want %v", as, want)
	}
	for _, a := range as {
		r := gen.Reader(a)
		for i := range 3 {
			rec, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("fetch %v/%d: %v", a.TopicPartition, i, err)
			}
			if want := value(a.TopicPartition, i); string(rec.Value) != want || rec.Offset != int64(i) || rec.HighWaterMark != 3 {
				t.Fatalf("record %q at %d (hwm %d), want %q at %d (hwm 3)", rec.Value, rec.Offset, rec.HighWaterMark, want, i)
			}
		}
		r.Close()
	}
	if err := gen.Commit(t.Context(), map[TopicPartition]int64{{topic, 0}: 3, {topic, 1}: 2, {other, 0}: 1}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	// The request counters: every record fetched (6 of 4 bytes, 3 of 10),
	// at least one fetch per partition, the one commit.
	got := gatherKafka(t, reg)
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{"hotspot_kafka_fetched_records_total", 9, 9},
		{"hotspot_kafka_fetched_bytes_total", 6*4 + 3*10, 6*4 + 3*10},
		{"hotspot_kafka_fetch_requests_total", 3, 1e9},
		{"hotspot_kafka_offset_commit_requests_total", 1, 1},
	} {
		if v := got[c.name]; v < c.min || v > c.max {
			t.Errorf("%s = %v, want %v..%v", c.name, v, c.min, c.max)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := gatherKafka(t, reg); len(got) != 0 {
		t.Errorf("after Close the registry still has %v", got)
	}

	// The next member of the group starts at the committed offsets.
	cfg2 := testConfig(addr, topic, group)
	cfg2.Topics = append(cfg2.Topics, other)
	g2, err := NewGroup(cfg2)
	if err != nil {
		t.Fatalf("NewGroup: %v", err)
	}
	defer g2.Close()
	gen2, err := g2.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	as = gen2.Assignments()
	slices.SortFunc(as, byTopicPartition)
	if want := []Assignment{{TopicPartition{topic, 0}, 3}, {TopicPartition{topic, 1}, 2}, {TopicPartition{other, 0}, 1}}; !slices.Equal(as, want) {
		t.Fatalf("assignments after commit %v, want %v", as, want)
	}
	for _, a := range as[1:] {
		r := gen2.Reader(a)
		rec, err := r.Fetch(ctx)
		r.Close()
		if want := value(a.TopicPartition, int(a.Offset)); err != nil || string(rec.Value) != want {
			t.Fatalf("first record of %v after commit: %q, %v; want %q", a.TopicPartition, rec.Value, err, want)
		}
	}
}

// gatherKafka returns the hotspot_kafka_* counters of reg by name.
func gatherKafka(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "hotspot_kafka_") {
			for _, m := range f.GetMetric() {
				out[f.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestFetchCanceledLosesNoRecord(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	createTopic(t, addr, topic, 1)
	const n = 200
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte(strconv.Itoa(i))
	}
	produce(t, addr, topic, 0, vals...)
	g, _, err := build(testConfig(addr, topic, "unused"))
	if err != nil {
		t.Fatal(err)
	}
	gen := &Generation{reader: g.reader}
	r := gen.Reader(Assignment{TopicPartition: TopicPartition{topic, 0}, Offset: kafka.FirstOffset})
	defer r.Close()
	deadline := time.Now().Add(30 * time.Second)
	next, canceled := int64(0), 0
	for next < n && time.Now().Before(deadline) {
		// Every third fetch runs with a context that ends at once.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if next%3 == 0 {
			cancel()
		}
		rec, err := r.Fetch(ctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.Fatalf("fetch: %v", err)
			}
			canceled++
			continue
		}
		if rec.Offset != next || string(rec.Value) != strconv.FormatInt(next, 10) {
			t.Fatalf("got offset %d (%q), want %d: a record was lost or repeated", rec.Offset, rec.Value, next)
		}
		next++
	}
	if next != n || canceled == 0 {
		t.Fatalf("read %d of %d records with %d canceled fetches; want all, some canceled", next, n, canceled)
	}
}

func TestCheckRejectsBadConfig(t *testing.T) {
	good := GroupConfig{Brokers: []string{"x:1"}, Topics: []string{"t", "u"}, Group: "g"}
	tests := []struct {
		name string
		edit func(*GroupConfig)
	}{
		{"no brokers", func(c *GroupConfig) { c.Brokers = nil }},
		{"no topic", func(c *GroupConfig) { c.Topics = nil }},
		{"empty topic", func(c *GroupConfig) { c.Topics = []string{"t", ""} }},
		{"topic twice", func(c *GroupConfig) { c.Topics = []string{"t", "u", "t"} }},
		{"no group", func(c *GroupConfig) { c.Group = "" }},
		{"heartbeat not below session", func(c *GroupConfig) { c.SessionTimeout, c.HeartbeatInterval = time.Second, time.Second }},
		{"negative max wait", func(c *GroupConfig) { c.MaxWait = -1 }},
		{"negative min bytes", func(c *GroupConfig) { c.MinBytes = -1 }},
		{"min bytes above max bytes", func(c *GroupConfig) { c.MinBytes, c.MaxBytes = 2<<20, 1<<20 }},
		{"negative session", func(c *GroupConfig) { c.SessionTimeout = -time.Second }},
	}
	if err := Check(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range tests {
		c := good
		tc.edit(&c)
		if err := Check(c); err == nil {
			t.Errorf("%s: Check accepted it", tc.name)
		}
	}
}
