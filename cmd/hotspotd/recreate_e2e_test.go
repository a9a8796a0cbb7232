package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// TestTopicRecreated: the access topic deleted and created again under a
// running hotspotd is counted in full. Two things made it miss keys before:
//   - kafka-go's reader waits for a partition to grow past the position it
//     read the old log to, so a hotspotd that had read 60,000 records of
//     each partition counted nothing of the new one for its first 60,000
//     records (here more than two minutes of traffic);
//   - the brokers create the topic again, with their default number of
//     partitions (8 on the local stack), for hotspotd's own metadata
//     requests, and the group read only the partitions it had, until the
//     next rebalance.
//
// A key at 1.2x the threshold is hot only if every partition is counted,
// each once: it is published, at no more than its rate, within about 10 s
// (the partition watch asks every 5 s, and kafkaio's rewindAfter is 5 s),
// and no cold key turns hot.
func TestTopicRecreated(t *testing.T) {
	const partitions, old = 2, 120_000
	c := newCluster(t, partitions)
	p1 := c.start("a1")
	w := c.watch(t)
	brokers := strings.Split(c.brokers, ",")

	// The old log: 60,000 cold records in each partition, read in full.
	bulk := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.topic, Balancer: &kafka.RoundRobin{},
		BatchSize: 5000, BatchTimeout: 10 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer bulk.Close()
	msgs := make([]kafka.Message, old)
	for i := range msgs {
		msgs[i].Value = wire.AppendJSON(nil, wire.Event{App: "shop", Key: "old:" + strconv.Itoa(i%50_000)})
	}
	if err := bulk.WriteMessages(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "hotspotd to read the old log", func() bool {
		return scrapeMetrics(t, p1.addr)["hotspot_detector_records_total"] >= old
	})

	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	if _, err := client.DeleteTopics(t.Context(), &kafka.DeleteTopicsRequest{Topics: []string{c.topic}}); err != nil {
		t.Fatal(err)
	}
	// Back as a new log: created here, or by the brokers for hotspotd's
	// own metadata requests (auto.create.topics.enable).
	waitFor(t, 30*time.Second, "the topic back as a new log", func() bool {
		if _, err := kafkaio.EnsureTopic(t.Context(), brokers, c.topic, partitions); err != nil {
			return false
		}
		resp, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{c.topic: {kafka.LastOffsetOf(0)}}})
		if err != nil || len(resp.Topics[c.topic]) != 1 {
			return false
		}
		p := resp.Topics[c.topic][0]
		return p.Error == nil && p.LastOffset >= 0 && p.LastOffset < old/partitions
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := newProducer(t, c.brokers, c.topic, false)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := time.Now()
	wg.Go(func() { prod.run(ctx, t, map[string]float64{"item:flash": 1200}, 2000) })
	waitFor(t, 25*time.Second, "item:flash, hot on the new topic, in ZooKeeper", func() bool {
		_, ok := w.Snapshot().Key("shop", "item:flash")
		return ok
	})
	t.Logf("item:flash published %v after the new topic's traffic began", time.Since(start).Round(time.Millisecond))

	var got struct {
		HotKeys []struct {
			Key  string  `json:"key"`
			Rate float64 `json:"rate"`
		} `json:"hotkeys"`
	}
	// hotspotd follows ZooKeeper through its own session: it may list the
	// key a moment after this test's watcher saw it.
	waitFor(t, 10*time.Second, "/v1/hotkeys to list item:flash alone", func() bool {
		got.HotKeys = nil
		getJSON(t, "http://"+p1.addr+"/v1/hotkeys?app=shop", &got)
		return len(got.HotKeys) == 1 && got.HotKeys[0].Key == "item:flash"
	})
	if r := got.HotKeys[0].Rate; r < 1000 || r > 1440 {
		t.Errorf("published rate %.0f, want 1000 to 1440 (the new log counted once)", r)
	}
}
