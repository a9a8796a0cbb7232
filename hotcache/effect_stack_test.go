package hotcache

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// TestEffectToKafka runs an instance against the real stack (the hot set in
// ZooKeeper, Redis, Kafka) and reads its access topic as a detector would:
// every access batch is of version 3 and names the instance, and the effect
// batches (version 4) that arrive every effect interval, and the last one at
// Close, say that the 100 Gets of the hot key were served from L1.
func TestEffectToKafka(t *testing.T) {
	broker, zkAddr, redisAddr := stacktest.Kafka(t), stacktest.ZK(t), stacktest.Redis(t)
	topic := stacktest.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := kafkaio.EnsureTopic(ctx, []string{broker}, topic, 1); err != nil {
		t.Fatal(err)
	}
	hs := stacktest.NewHotSet(t, zkAddr)
	prefix := hs.App + ":"
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"hot", prefix+"cold") })
	instance := "effect-test/" + hs.App
	c := newClient(t, WithApp(hs.App), WithInstanceID(instance), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(redisAddr), WithRedisKeyPrefix(prefix), WithLoader(newSource("hot", "0123456789", "cold", "abc")),
		WithKafka([]string{broker}, topic), WithEffectReports(500*time.Millisecond))
	if c.Instance() != instance {
		t.Fatalf("Instance() = %q, want %q", c.Instance(), instance)
	}
	hs.Set("hot")
	waitFor(t, "hot in L1", func() bool { h := c.Hot(); return len(h) == 1 && h[0].Loaded })
	for range 100 {
		get(t, c, "hot")
	}
	for range 5 {
		get(t, c, "cold")
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	reads := map[string]uint64{}
	effects := map[string]wire.EffectCounts{}
	var effectBatches int
	d := wire.Decoder{OnEffect: func(e *wire.EffectEntry) {
		if string(e.App) != hs.App || string(e.Src) != instance {
			t.Errorf("effect of app %q from %q, want %q from %q", e.App, e.Src, hs.App, instance)
		}
		if e.Period <= 0 || e.Period > 10_000 || time.Since(time.UnixMilli(e.End)) > time.Minute {
			t.Errorf("effect period %d ms ending at %v, want a period of about 500 ms ending now", e.Period, time.UnixMilli(e.End))
		}
		ec := effects[string(e.Key)]
		ec.L1Hits += e.L1Hits
		ec.L2Reads += e.L2Reads
		ec.SourceLoads += e.SourceLoads
		ec.Limited += e.Limited
		effects[string(e.Key)] = ec
	}}
	read := func(m kafka.Message) {
		if len(m.Value) < 2 || (m.Value[1] != 3 && m.Value[1] != 4) {
			t.Errorf("record % x...: want an access batch of version 3 or an effect batch (4)", m.Value[:min(len(m.Value), 2)])
		}
		if len(m.Value) > 1 && m.Value[1] == 4 {
			effectBatches++
		}
		if err := d.Decode(m.Value, func(e *wire.Entry) {
			if string(e.Src) != instance {
				t.Errorf("access of %q from %q, want from %q", e.Key, e.Src, instance)
			}
			reads[string(e.Key)] += e.Count
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The reports of the running instance: an effect batch every 500 ms.
	for effects["hot"].L1Hits < 100 || reads["hot"] < 100 || reads["cold"] < 5 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read reports: %v (reads %v, effects %v)", err, reads, effects)
		}
		read(m)
	}
	// Then everything up to Close's last reports.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	end := stacktest.EndOffset(t, broker, topic)
	for r.Offset() < end {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read reports: %v", err)
		}
		read(m)
	}
	if reads["hot"] != 100 || reads["cold"] != 5 || len(reads) != 2 {
		t.Errorf("accesses reported: %v, want hot:100 cold:5", reads)
	}
	if want := (wire.EffectCounts{L1Hits: 100}); effects["hot"] != want || len(effects) != 1 {
		t.Errorf("effect reported: %+v, want hot: %+v and no other key", effects, want)
	}
	if effectBatches == 0 {
		t.Error("no effect batch read")
	}
}
