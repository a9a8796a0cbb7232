package kafkaio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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

// recreateTopic deletes topic, which held more than n records, and waits
// until its partition 0 is a new log (of n records at most), created again
// by the brokers (auto.create.topics.enable: a reader's metadata requests
// do it) or here.
func recreateTopic(t *testing.T, addr, topic string, n int64) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	if _, err := client.DeleteTopics(t.Context(), &kafka.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(200 * time.Millisecond)
		if _, err := EnsureTopic(t.Context(), []string{addr}, topic, 1); err != nil {
			continue
		}
		resp, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}})
		if err == nil && len(resp.Topics[topic]) == 1 {
			if p := resp.Topics[topic][0]; p.Error == nil && p.LastOffset >= 0 && p.LastOffset <= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not back as a new log 30 s after its deletion", topic)
		}
	}
}

// readUntil fetches from r until it returns the record of want (an offset),
// and returns that record and the errors met on the way.
func readUntil(t *testing.T, r *Reader, want int64, within time.Duration) (Record, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var errs []error
	for {
		rec, err := r.Fetch(ctx)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("no record at offset %d within %v; errors on the way: %v", want, within, errs)
		case err != nil:
			errs = append(errs, err)
		case rec.Offset == want:
			return rec, errs
		}
	}
}

// TestFetchRewindsToARecreatedLog: a reader whose topic is deleted and
// created again reads the new log from its start once the log has kept
// ending before its position for rewindAfter, instead of waiting for the
// new log to grow past it (kafka-go's own behaviour, which skipped every
// record the new topic got). A reader opened past the end of a log (an
// offset handed on from the old topic) does the same.
func TestFetchRewindsToARecreatedLog(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	createTopic(t, addr, topic, 1)
	old := make([][]byte, 300)
	for i := range old {
		old[i] = []byte("old-" + strconv.Itoa(i))
	}
	produce(t, addr, topic, 0, old...)
	g, _, err := build(testConfig(addr, topic, "unused"))
	if err != nil {
		t.Fatal(err)
	}
	gen := &Generation{reader: g.reader, start: g.start, client: &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}}
	r := gen.Reader(Assignment{TopicPartition: TopicPartition{topic, 0}, Offset: kafka.FirstOffset})
	defer r.Close()
	readUntil(t, r, 299, 20*time.Second)

	recreateTopic(t, addr, topic, 0)
	produce(t, addr, topic, 0, []byte("new-0"), []byte("new-1"))
	start := time.Now()
	rec, errs := readUntil(t, r, 0, rewindAfter+20*time.Second)
	if string(rec.Value) != "new-0" {
		t.Fatalf("first record read after the topic came back: %q, want new-0", rec.Value)
	}
	if !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, ErrRewound) }) {
		t.Fatalf("no ErrRewound among the errors before the new log's first record: %v", errs)
	}
	t.Logf("new log read from its start %v after its first record was written; errors on the way: %d", time.Since(start).Round(time.Millisecond), len(errs))
	if rec, _ := readUntil(t, r, 1, 5*time.Second); string(rec.Value) != "new-1" {
		t.Fatalf("record 1 of the new log: %q, want new-1", rec.Value)
	}

	// An offset handed on from the old log: past the new one's end.
	r2 := gen.Reader(Assignment{TopicPartition: TopicPartition{topic, 0}, Offset: 300})
	defer r2.Close()
	rec, errs = readUntil(t, r2, 0, rewindAfter+20*time.Second)
	if string(rec.Value) != "new-0" || !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, ErrRewound) }) {
		t.Fatalf("a reader opened at offset 300 of a 2-record log read %q after errors %v; want new-0 after ErrRewound", rec.Value, errs)
	}
}

// TestGroupFollowsPartitionChanges: a generation lasts while the topics'
// partitions stay as they were, and partitions added to a topic end it
// within a partition watch or two: the next generation reads them. Before,
// they waited for the group's membership to change.
func TestGroupFollowsPartitionChanges(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	createTopic(t, addr, topic, 1)
	g, err := NewGroup(testConfig(addr, topic, group))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	next := func() (*Generation, chan struct{}) {
		gen, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ended := make(chan struct{})
		gen.Start(func(ctx context.Context) { <-ctx.Done(); close(ended) })
		return gen, ended
	}
	gen, ended := next()
	if n := len(gen.Assignments()); n != 1 {
		t.Fatalf("first generation: %v, want partition 0 alone", gen.Assignments())
	}
	select {
	case <-ended:
		t.Fatal("the generation ended while the partitions stayed as they were")
	case <-time.After(2*partitionWatch + time.Second):
	}

	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	resp, err := client.CreatePartitions(t.Context(), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 3}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	select {
	case <-ended:
	case <-time.After(2*partitionWatch + 5*time.Second):
		t.Fatal("the generation outlived partitions added to its topic")
	}
	gen, _ = next()
	t.Logf("a generation with the new partitions %v after they were added", time.Since(added).Round(time.Millisecond))
	if n := len(gen.Assignments()); n != 3 {
		t.Fatalf("generation after partitions were added: %v, want partitions 0, 1 and 2", gen.Assignments())
	}
}

// TestPartitionCountsOfAMissingTopic: the partition watch counts a topic
// that does not exist as none, and asking does not make the brokers create
// it (the local stacks create topics for the older metadata requests of
// kafka-go's readers and group leader).
func TestPartitionCountsOfAMissingTopic(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, missing := stacktest.Name(t), stacktest.Name(t)+".missing"
	createTopic(t, addr, topic, 2)
	cfg := testConfig(addr, topic, "unused")
	cfg.Topics = append(cfg.Topics, missing)
	// Not NewGroup: its join would have kafka-go's group leader ask for the
	// topics in a way that creates them.
	g, _, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.client = &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	for i := range 2 { // the second time, half a second on: the first must not have created it
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		counts, err := g.partitionCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{topic: 2, missing: 0}; !maps.Equal(counts, want) {
			t.Fatalf("partition counts %v, want %v", counts, want)
		}
	}
}

// TestJittered: a retry wait stays within ±20 % of its base, and varies.
func TestJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered(partitionRetry)
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("jittered(%v) = %v, want within ±20 %%", partitionRetry, d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("jittered gave %d distinct waits in 1000 calls, want them spread", len(seen))
	}
}
