package hotcache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// These tests run against the real local stack: what rules need from the
// SDK (bytes and writes in its batches, write keys never cached).

// TestReportBytesAndWritesToKafka checks that what the SDK serves and writes
// reaches Kafka as version 3 batch entries with the right op and bytes, as
// the detector decodes them: reads of a key in L1, of a key in Redis and of
// a key loaded from the source, and Sets and Deletes.
func TestReportBytesAndWritesToKafka(t *testing.T) {
	broker, zkAddr, redisAddr := stacktest.Kafka(t), stacktest.ZK(t), stacktest.Redis(t)
	topic := stacktest.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := kafkaio.EnsureTopic(ctx, []string{broker}, topic, 1); err != nil {
		t.Fatal(err)
	}
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("hot", "0123456789", "l2", "abcd", "src", "xyz")
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	prefix := hs.App + ":"
	if err := rdb.Set(ctx, prefix+"l2", "abcde", time.Minute).Err(); err != nil { // in Redis, 5 bytes
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"l2", prefix+"src", prefix+"hot", prefix+"w") })
	c := newClient(t, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root), WithRedis(redisAddr),
		WithRedisKeyPrefix(prefix), WithLoader(src), WithKafka([]string{broker}, topic),
		WithLocalProtection(NoLimit, time.Second))
	hs.SetKeys(hotset.Key{Key: "hot", Rate: 5000, Rule: ruleIndex(-1), Kind: "count"})
	waitFor(t, "hot in L1", func() bool { h := c.Hot(); return len(h) == 1 && h[0].Loaded })

	for range 200 {
		get(t, c, "hot") // L1: 10 bytes each
	}
	for range 3 {
		get(t, c, "l2") // Redis: 5 bytes each
	}
	get(t, c, "src") // the Loader: 3 bytes
	if _, err := c.Get(ctx, "nothing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(nothing) = %v, want ErrNotFound", err)
	}
	for _, v := range []string{"1234567", "12"} {
		if err := c.Set(ctx, "w", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, "w"); err != nil {
		t.Fatal(err)
	}

	type opKey struct {
		key string
		op  wire.Op
	}
	type sum struct{ count, bytes uint64 }
	want := map[opKey]sum{
		{"hot", wire.OpRead}:     {200, 2000},
		{"l2", wire.OpRead}:      {3, 15},
		{"src", wire.OpRead}:     {1, 3},
		{"nothing", wire.OpRead}: {1, 0},
		{"w", wire.OpWrite}:      {3, 9},
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	got := map[opKey]sum{}
	var d wire.Decoder
	done := func() bool {
		for k, w := range want {
			if got[k].count < w.count {
				return false
			}
		}
		return true
	}
	for !done() {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read reports: %v (so far %v)", err, got)
		}
		if len(m.Value) < 2 || (m.Value[1] != 3 && m.Value[1] != 4) {
			t.Errorf("record % x...: want an access batch of version 3 or an effect batch (version 4)", m.Value[:min(len(m.Value), 2)])
		}
		if err := d.Decode(m.Value, func(e *wire.Entry) {
			k := opKey{string(e.Key), e.Op}
			s := got[k]
			s.count += e.Count
			s.bytes += e.Bytes
			got[k] = s
		}); err != nil {
			t.Fatal(err)
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s %v: reported %+v, want %+v", k.key, k.op, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %v, want only %v", got, want)
	}
}

// TestWriteKeyNeverInL1 publishes a count key and a write key in a shard
// node on the real ZooKeeper: the count key is served from L1, the write
// key always from Redis (a value changed in Redis behind the SDK's back is
// seen at once); then the count key turns into a write key and leaves L1.
func TestWriteKeyNeverInL1(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	ctx := t.Context()
	hs := stacktest.NewHotSet(t, zkAddr)
	prefix := hs.App + ":"
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"c", prefix+"w") })
	src := newSource("c", "c1", "w", "w1")
	// Without client tracking, a value changed in Redis behind the SDK's back
	// shows which copy a Get serves.
	cs := startInstances(t, 2, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(redisAddr), WithRedisKeyPrefix(prefix), WithLoader(src),
		WithLocalProtection(NoLimit, time.Second), WithRedisTracking(false))
	hs.SetKeys(hotset.Key{Key: "c", Rate: 5000, Rule: ruleIndex(0), Kind: "count"},
		hotset.Key{Key: "w", Rate: 5000, Rule: ruleIndex(1), Kind: "write"})
	for _, c := range cs {
		waitFor(t, "c in L1 and w published", func() bool {
			var cLoaded, wSeen bool
			for _, h := range c.Hot() {
				switch h.Key {
				case "c":
					cLoaded = h.Loaded && h.Kind == "count" && h.Rule == 0
				case "w":
					wSeen = h.Kind == "write" && h.Rule == 1
				}
			}
			return cLoaded && wSeen
		})
		if got := get(t, c, "w"); got != "w1" {
			t.Fatalf("Get(w) = %q, want w1", got)
		}
	}
	// Change both values in Redis only: an L1 copy would not see it.
	for k, v := range map[string]string{"c": "c2", "w": "w2"} {
		if err := rdb.Set(ctx, prefix+k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		if c.IsHot("w") {
			t.Errorf("instance %d: IsHot(w) = true, want false for a write key", i)
		}
		for range 5 {
			if got := get(t, c, "w"); got != "w2" {
				t.Errorf("instance %d: Get(w) = %q, want w2 from Redis (a write key is never in L1)", i, got)
			}
			if got := get(t, c, "c"); got != "c1" {
				t.Errorf("instance %d: Get(c) = %q, want c1 from L1", i, got)
			}
		}
	}
	// c turns into a write key: every instance drops it from L1.
	start := time.Now()
	hs.SetKeys(hotset.Key{Key: "c", Rate: 5000, Rule: ruleIndex(1), Kind: "write"},
		hotset.Key{Key: "w", Rate: 5000, Rule: ruleIndex(1), Kind: "write"})
	for i, c := range cs {
		waitFor(t, "c out of L1", func() bool { return !c.IsHot("c") })
		if got := get(t, c, "c"); got != "c2" {
			t.Errorf("instance %d: Get(c) after it turned write = %q, want c2 from Redis", i, got)
		}
	}
	t.Logf("count -> write: out of L1 on every instance %v after the znode write", time.Since(start))
}
