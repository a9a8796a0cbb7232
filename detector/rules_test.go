package detector

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/rules"
)

// flushed returns the counts of one flush by "app/key".
func flushed(c *counter, final bool) map[string]Count {
	out := map[string]Count{}
	for _, ct := range c.flush(nil, final) {
		out[ct.App+"/"+ct.Key] = ct
	}
	return out
}

func TestCounterCarriesWritesAndBytes(t *testing.T) {
	c := newCounter(tBucket, 10, 1000, 1<<20)
	c.cutoff = 10
	c.advance(0)
	w1 := appWeights{access: 1} // one access weighs 1: cutoff 10 accesses
	count := func(key string, n, bytes uint64, op wire.Op) {
		c.count(&wire.Entry{App: []byte("a"), Key: []byte(key), Count: n, Bytes: bytes, Op: op}, w1)
	}
	// hot: 6 reads of 600 bytes and 5 writes of 50, 11 accesses in all.
	count("hot", 6, 600, wire.OpRead)
	count("hot", 5, 50, wire.OpWrite)
	// cold: 3 writes of 30 bytes and 2 plain reads, under the cutoff.
	count("cold", 3, 30, wire.OpWrite)
	count("cold", 2, 0, wire.OpRead)
	// plain: reads without bytes only, over the cutoff.
	count("plain", 12, 0, wire.OpRead)
	c.advance(tBucket) // the bucket closes: hot and plain forwarded, cold dropped
	want := map[string]Count{
		"a/hot":   {App: "a", Key: "hot", N: 11, Writes: 5, Bytes: 650, WriteBytes: 50},
		"a/plain": {App: "a", Key: "plain", N: 12},
	}
	if got := flushed(c, false); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first flush: got %v, want %v", got, want)
	}
	if st := c.takeStats(); st.filtered != 5 {
		t.Errorf("filtered %d accesses, want 5 (cold's)", st.filtered)
	}
	// cold's window reaches the cutoff in the next bucket: its new accesses
	// are forwarded with their own bytes, not the dropped bucket's writes.
	count("cold", 6, 70, wire.OpRead)
	count("hot", 1, 0, wire.OpRead) // still over the cutoff: forwarded at once
	want = map[string]Count{
		"a/cold": {App: "a", Key: "cold", N: 6, Bytes: 70},
		"a/hot":  {App: "a", Key: "hot", N: 1},
	}
	if got := flushed(c, false); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second flush: got %v, want %v", got, want)
	}
	if got := flushed(c, true); len(got) != 0 {
		t.Fatalf("third flush: got %v, want nothing (each count is handed on once)", got)
	}
	// Once every key left the window, their extras are free for others.
	c.advance(100 * tBucket)
	c.flush(nil, false)
	if c.len() != 0 || len(c.freeExt) != len(c.extras) || len(c.extras) != 2 {
		t.Errorf("after the window: %d keys, %d of %d extras free; want 0 keys, 2 of 2 free", c.len(), len(c.freeExt), len(c.extras))
	}
	count("new", 1, 5, wire.OpWrite)
	c.advance(101 * tBucket)
	if got := flushed(c, true); len(got) != 0 || len(c.extras) != 2 {
		t.Errorf("a cold key reusing extras: forwarded %v, %d extras; want nothing, 2", got, len(c.extras))
	}
}

// TestRulesWeights checks, for each kind of rule, how many accesses (or
// bytes, with one access) a key needs in one bucket to be forwarded, with
// the detector's own Threshold 1000/s, Window 1s, Alpha 0.05, one detector
// and one partition: 50 accesses under the default rule.
func TestRulesWeights(t *testing.T) {
	cfg := Config{Threshold: 1000, Window: time.Second, Bucket: 100 * time.Millisecond, Alpha: 0.05}
	def := rules.Default(1000, time.Second, 5*time.Second, 0.8)
	tests := []struct {
		name      string
		rules     []rules.Rule
		accesses  uint64 // accesses without bytes it takes to be forwarded
		bytes     uint64 // bytes that one access needs to be forwarded; 0: bytes weigh nothing
		forwardsN bool   // every access forwarded
	}{
		{"no rules", nil, 50, 0, false},
		{"a higher threshold changes nothing", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Threshold: 5000}}, 50, 0, false},
		{"a never rule changes nothing", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Mode: rules.Never, Threshold: 1}}, 50, 0, false},
		// Alpha × 100/s × 1 s = 5 accesses.
		{"threshold 100/s", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Threshold: 100}}, 5, 0, false},
		// The smallest among several.
		{"threshold 100/s and 40/s", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Threshold: 100},
			{Match: rules.Exact, Pattern: "b", Threshold: 40, Ops: rules.Write}}, 2, 0, false},
		// A 500 ms window at 1000/s tolerates 0.05 × 500 = 25 accesses.
		{"window 500ms", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Window: 500 * time.Millisecond}}, 25, 0, false},
		// 3 s spans 3 detector windows: 1000/s × 3 s / 3, the default.
		{"window 3s", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Window: 3 * time.Second}}, 50, 0, false},
		// 1.5 s spans 2 detector windows: 0.05 × 1000 × 1.5 / 2 = 37.5.
		{"window 1.5s", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Window: 1500 * time.Millisecond}}, 38, 0, false},
		// Bytes at 10000/s: 0.05 × 10000 = 500 bytes; the access itself
		// weighs a fiftieth of the cutoff, so 490 bytes with it suffice.
		{"bytes 10000/s", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Measure: rules.Bytes, Threshold: 10000}}, 50, 490, false},
		{"topk", []rules.Rule{{Match: rules.Prefix, Pattern: "a", Mode: rules.TopK, K: 10}}, 1, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := rules.Compile(&rules.List{App: "a", Rules: tc.rules}, def)
			if err != nil {
				t.Fatal(err)
			}
			aw := cfg.weightsFor(s)
			if got := aw.access >= cfg.cutoff(1, 1); got != tc.forwardsN {
				t.Fatalf("weights %+v: forward every access = %v, want %v", aw, got, tc.forwardsN)
			}
			forwarded := func(n, bytes uint64) bool {
				c := newCounter(tBucket, 10, 1000, 1<<20)
				c.cutoff = cfg.cutoff(1, 1)
				c.advance(0)
				c.count(&wire.Entry{App: []byte("a"), Key: []byte("k"), Count: n, Bytes: bytes}, aw)
				c.advance(tBucket)
				return len(c.flush(nil, false)) == 1
			}
			if forwarded(tc.accesses-1, 0) || !forwarded(tc.accesses, 0) {
				t.Errorf("weights %+v: %d accesses forwarded %v, %d forwarded %v; want false, true",
					aw, tc.accesses-1, forwarded(tc.accesses-1, 0), tc.accesses, forwarded(tc.accesses, 0))
			}
			if tc.bytes > 0 && (forwarded(1, tc.bytes-1) || !forwarded(1, tc.bytes)) {
				t.Errorf("weights %+v: one access of %d bytes forwarded %v, of %d bytes %v; want false, true",
					aw, tc.bytes-1, forwarded(1, tc.bytes-1), tc.bytes, forwarded(1, tc.bytes))
			}
			if tc.bytes == 0 && !tc.forwardsN && forwarded(1, 1<<40) {
				t.Errorf("weights %+v: bytes weigh without a bytes rule", aw)
			}
		})
	}
}

// TestRulesLossBound checks the loss bound per rule on random traffic: an
// app whose rules count 100 accesses/s and 20000 bytes/s over 1 s loses,
// on one partition, fewer than 5 accesses and fewer than 1000 bytes in any
// window, with the detector's own cutoff at 50 accesses.
func TestRulesLossBound(t *testing.T) {
	const nBuckets, maxAccesses, maxBytes = 10, 5, 1000
	cfg := Config{Threshold: 1000, Window: time.Second, Bucket: 100 * time.Millisecond, Alpha: 0.05}
	s, err := rules.Compile(&rules.List{App: "a", Rules: []rules.Rule{
		{Match: rules.Prefix, Pattern: "c", Threshold: 100},
		{Match: rules.Prefix, Pattern: "b", Measure: rules.Bytes, Threshold: 20000},
	}}, rules.Default(1000, time.Second, 5*time.Second, 0.8))
	if err != nil {
		t.Fatal(err)
	}
	aw := cfg.weightsFor(s)
	var worstN, worstB uint64
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 9))
		c := newCounter(tBucket, nBuckets, 1000, 1<<20)
		c.cutoff = cfg.cutoff(1, 1)
		c.advance(0)
		const total = 1000
		arrived := make([]Count, total)
		fwd := make([]Count, total)
		for b := range int64(total) {
			c.advance(b * tBucket)
			if b > 0 {
				for _, ct := range c.flush(nil, false) {
					fwd[b-1] = ct
				}
			}
			if rng.IntN(3) != 0 {
				continue
			}
			n := uint64(rng.IntN(2) + 1)
			by := uint64(rng.IntN(300)) * n
			if rng.IntN(50) == 0 {
				by = uint64(rng.IntN(2 * maxBytes)) // bursts of bytes
			}
			op := wire.Op(rng.IntN(2))
			c.count(&wire.Entry{App: []byte("a"), Key: []byte("k"), Count: n, Bytes: by, Op: op}, aw)
			arrived[b] = Count{N: n, Bytes: by}
		}
		for b := 0; b+nBuckets+1 <= total-1; b++ {
			var lostN, lostB uint64
			for j := b; j < b+nBuckets+1; j++ {
				lostN += arrived[j].N - fwd[j].N
				lostB += arrived[j].Bytes - fwd[j].Bytes
			}
			if lostN >= maxAccesses || lostB >= maxBytes {
				t.Fatalf("seed %d: buckets %d..%d lost %d accesses and %d bytes, want < %d and < %d",
					seed, b, b+nBuckets, lostN, lostB, maxAccesses, maxBytes)
			}
			worstN, worstB = max(worstN, lostN), max(worstB, lostB)
		}
	}
	if worstN < 2 || worstB < maxBytes/2 {
		t.Fatalf("worst loss %d accesses, %d bytes: the test never came near the bounds", worstN, worstB)
	}
	t.Logf("worst loss over any %d buckets: %d accesses (bound < %d), %d bytes (bound < %d)", nBuckets+1, worstN, maxAccesses, worstB, maxBytes)
}

// TestRunCarriesWritesAndBytesAndRules runs a detector on two partitions:
// a key's writes and bytes from both reach the Sink merged, and SetRules
// lowers the cutoff for one app only.
func TestRunCarriesWritesAndBytesAndRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0, 1)
		// Alpha 0.05, Threshold 1000, Window 1s, one detector, P 2: 25
		// accesses; shop's rule at 100/s: 2.5, so 3.
		d, stop := startFake(t, Config{}, src, sink)
		s, err := rules.Compile(&rules.List{App: "shop", Rules: []rules.Rule{{Match: rules.Prefix, Pattern: "item:", Threshold: 100}}},
			rules.Default(1000, time.Second, 5*time.Second, 0.8))
		if err != nil {
			t.Fatal(err)
		}
		d.SetRules("shop", s)
		time.Sleep(10 * time.Millisecond)
		topic.append(0, []byte(`{"key":"blob","count":20,"bytes":20000}`+"\n"+`{"key":"blob","count":5,"bytes":7000,"op":"write"}`),
			[]byte(`{"app":"shop","key":"item:1","count":3,"op":"write","bytes":30}`),
			[]byte(`{"app":"other","key":"item:1","count":3,"op":"write","bytes":30}`))
		topic.append(1, []byte(`{"key":"blob","count":30,"op":"write","bytes":1}`))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		got := sink.totals()
		want := map[string]Count{
			"default/blob": {App: "default", Key: "blob", N: 55, Writes: 35, Bytes: 27001, WriteBytes: 7001},
			"shop/item:1":  {App: "shop", Key: "item:1", N: 3, Writes: 3, Bytes: 30, WriteBytes: 30},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("forwarded %v, want %v", got, want)
		}
		// A key on both partitions is merged into one Count per flush.
		for _, call := range sink.callLog() {
			n := 0
			for _, c := range call {
				if c.Key == "blob" {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("blob sent %d times in one flush: %v", n, call)
			}
		}
		d.SetRules("shop", nil)
		if d.weights.Load() != nil {
			t.Errorf("weights after the only app's rules were dropped: %+v, want none", d.weights.Load())
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
