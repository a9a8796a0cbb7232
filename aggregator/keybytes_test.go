package aggregator

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/rules"
)

// heapAlloc returns the live heap after a full collection.
func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestKeyBytesMatchesHeap holds the table's account of its keys (keyBytes)
// within 5 % of the heap they take, measured around 20 000 insertions under
// rules of 100 ms to 60 s windows and with 10- and 40-byte keys.
func TestKeyBytesMatchesHeap(t *testing.T) {
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second, 60 * time.Second} {
		for _, keyLen := range []int{10, 40} {
			t.Run(fmt.Sprintf("%v/%dB", w, keyLen), func(t *testing.T) {
				const keys = 20_000
				tb, _ := testTable(t, func(c *Config) { c.MaxKeys, c.MaxBytes = 1<<30, 1<<40 })
				tb.setRules("app", compile(t, tb, rules.Rule{Match: rules.Prefix, Pattern: "k", Window: w}), fixed(t0))
				names := make([]string, keys) // made before: their bytes are not the table's
				for i := range names {
					names[i] = fmt.Sprintf("k%0*d", keyLen-1, i)
				}
				before := heapAlloc()
				for _, k := range names {
					tb.addT("app", k, tally{n: 1}, t0)
				}
				heap := heapAlloc() - before
				runtime.KeepAlive(tb)
				runtime.KeepAlive(names)
				acct := tb.bytes
				t.Logf("heap %d B/key, accounted %d B/key", heap/keys, acct/keys)
				if d := math.Abs(float64(acct-heap)) / float64(heap); d > 0.05 {
					t.Errorf("accounted %d bytes for %d keys, heap grew %d: %.1f%% apart, want within 5%%", acct, keys, heap, 100*d)
				}
				if got := testutil.ToFloat64(tb.m.trackedBytes); got != float64(acct) {
					t.Errorf("tracked_bytes = %v, want %d", got, acct)
				}
			})
		}
	}
}

func TestAllocBytes(t *testing.T) {
	tests := []struct{ n, want int64 }{
		{0, 0}, {1, 8}, {8, 8}, {9, 16}, {176, 176}, {177, 192}, {4896, 5376},
		{32768, 32768}, {32769, 40960}, {80_016, 81920},
	}
	for _, tt := range tests {
		if got := allocBytes(tt.n); got != tt.want {
			t.Errorf("allocBytes(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

// TestBoundedBytes: at MaxBytes a newcomer evicts the coldest sampled keys
// that are not hot, as many as its cost needs, or is refused when it is
// colder than them; a hot key is never evicted; the account follows every
// change.
func TestBoundedBytes(t *testing.T) {
	tb, _ := testTable(t, nil)
	tb.setRules("app", compile(t, tb, rules.Rule{Match: rules.Prefix, Pattern: "long:", Window: time.Minute}), fixed(t0))
	short, long := keyBytes(len("warm00"), tb.ringSize(tb.defRules.def)), keyBytes(len("long:0"), tb.ringSize(tb.sets["app"].rule[0]))
	tb.p.maxBytes = 16 * short // room for sixteen 1 s keys
	tb.addS("app", "hot000", 5000, t0)
	for i := range 15 {
		tb.addS("app", fmt.Sprintf("warm%02d", i), 100, t0)
	}
	if !tb.isHot("app", "hot000") || len(tb.entries) != 16 || tb.bytes != 16*short {
		t.Fatalf("setup: %d keys, %d bytes, want 16 keys, %d bytes, hot000 hot", len(tb.entries), tb.bytes, 16*short)
	}
	tb.addS("app", "cold00", 1, t0)
	if _, ok := tb.key("app", "cold00", t0); ok {
		t.Error("a newcomer colder than all tracked keys was admitted")
	}
	// A 60 s key at half its threshold, hotter than the warm keys, takes
	// the place of as many of them as its ring needs (4 here), never the
	// hot key's.
	tb.p.maxBytes = 12*short + long
	tb.addS("app", "long:0", 30*1000, t0)
	if _, ok := tb.key("app", "long:0", t0); !ok {
		t.Fatal("a 60 s key hotter than the warm keys was refused")
	}
	if !tb.isHot("app", "hot000") {
		t.Fatal("the hot key was evicted")
	}
	if len(tb.entries) != 13 || tb.bytes != 12*short+long {
		t.Errorf("tracked %d keys, %d bytes; want 13 keys, %d bytes", len(tb.entries), tb.bytes, 12*short+long)
	}
	if got := testutil.ToFloat64(tb.m.evicted.WithLabelValues("cap_bytes")); got != 4 {
		t.Errorf("cap_bytes evictions = %v, want 4", got)
	}
	if got := testutil.ToFloat64(tb.m.trackedBytes); got != float64(tb.bytes) {
		t.Errorf("tracked_bytes = %v, want %d", got, tb.bytes)
	}
	// Idle keys leave and give their bytes back; the hot key stays.
	tb.sweep(t0.Add(2 * time.Minute))
	if len(tb.entries) != 1 || tb.bytes != short {
		t.Errorf("after the keys went idle: %d keys, %d bytes; want the hot key's %d", len(tb.entries), tb.bytes, short)
	}
}

// TestRestoreWithinBytes: keys restored hot at start are accounted and
// stop at MaxBytes.
func TestRestoreWithinBytes(t *testing.T) {
	tb, _ := testTable(t, nil)
	cost := keyBytes(len("k0"), tb.ringSize(tb.defRules.def))
	tb.p.maxBytes = 3 * cost
	node := &hotset.Shard{App: "app", Shard: "s1", Updated: t0.UnixMilli(), TTL: 10000}
	for i := range 5 {
		node.Keys = append(node.Keys, hotset.Key{Key: fmt.Sprint("k", i), Rate: 5000})
	}
	if n := tb.restore(node, t0); n != 3 {
		t.Errorf("restored %d keys, want 3", n)
	}
	if tb.bytes != 3*cost || testutil.ToFloat64(tb.m.trackedBytes) != float64(3*cost) {
		t.Errorf("accounted %d (tracked_bytes %v), want %d", tb.bytes, testutil.ToFloat64(tb.m.trackedBytes), 3*cost)
	}
}

// TestBytesFollowRules: a rule change that lengthens windows is accounted
// and trims the table back to MaxBytes, the coldest first; one that
// shortens them gives bytes back.
func TestBytesFollowRules(t *testing.T) {
	tb, _ := testTable(t, nil)
	short := keyBytes(4, tb.ringSize(tb.defRules.def))
	tb.p.maxBytes = 100 * short
	for i := range 100 {
		tb.addS("app", fmt.Sprintf("k%03d", i), uint64(i+1), t0)
	}
	if tb.bytes != 100*short {
		t.Fatalf("accounted %d, want %d", tb.bytes, 100*short)
	}
	tb.setRules("app", compile(t, tb, rules.Rule{Match: rules.Prefix, Pattern: "k", Window: time.Minute}), fixed(t0))
	long := keyBytes(4, tb.ringSize(tb.sets["app"].rule[0]))
	var sum int64
	for _, e := range tb.entries {
		sum += bytesOf(e)
	}
	if tb.bytes != sum || tb.bytes > tb.p.maxBytes {
		t.Errorf("after lengthening: accounted %d, keys cost %d, bound %d", tb.bytes, sum, tb.p.maxBytes)
	}
	if want := int(tb.p.maxBytes / long); len(tb.entries) != want {
		t.Errorf("after lengthening: %d keys, want %d", len(tb.entries), want)
	}
	if _, ok := tb.key("app", "k099", t0); !ok {
		t.Error("the busiest key was trimmed") // only if all 8 samples of an eviction were it
	}
	n := len(tb.entries)
	tb.setRules("app", nil, fixed(t0))
	if tb.bytes != int64(n)*short {
		t.Errorf("after shortening: accounted %d, want %d", tb.bytes, int64(n)*short)
	}
}

// TestByteBoundTenMillionKeysAMinute drives the table at 10 M distinct keys
// a minute, each seen once, under a 60 s rule, on a fake clock: a batch a
// bucket and a sweep after it, as the loop does. Without a byte bound every
// key would stay tracked for its minute (MaxKeys is set out of reach). The
// account must stay within MaxBytes at every batch and the live heap
// within it plus 5 % at every simulated second; hot keys, which are never
// evicted, are in it too.
func TestByteBoundTenMillionKeysAMinute(t *testing.T) {
	const (
		maxBytes  = 8 << 20
		perMinute = 10_000_000
		perBucket = perMinute / 600 // 100 ms buckets
	)
	seconds := 6 // 1 M keys: the table is full after 1 500
	if testing.Short() || raceEnabled {
		seconds = 2
	}
	tb, c := testTable(t, func(c *Config) { c.MaxKeys, c.MaxBytes = 1<<30, maxBytes })
	tb.setRules("app", compile(t, tb,
		rules.Rule{Match: rules.Prefix, Pattern: "hot:", Window: time.Minute, Threshold: 1},
		rules.Rule{Match: rules.Prefix, Pattern: "k", Window: time.Minute}), fixed(t0))
	base := heapAlloc()
	key := []byte("k")
	now := t0
	var peak int64
	for b := range seconds * 10 {
		tb.mu.Lock()
		tb.heard(now)
		tb.setReach(now)
		if b%10 == 0 { // a few keys hot under their own rule, at 1/s
			tb.add([]byte("app"), fmt.Appendf(nil, "hot:%d", b), tally{n: 100}, now, span{buckets: 1})
		}
		for i := range perBucket {
			key = strconv.AppendInt(key[:1], int64(b*perBucket+i), 36)
			tb.add([]byte("app"), key, tally{n: uint64(1 + i%7)}, now, span{buckets: 1})
		}
		acct := tb.bytes
		tb.mu.Unlock()
		if acct > maxBytes {
			t.Fatalf("bucket %d: %d bytes accounted, bound %d", b, acct, maxBytes)
		}
		if got := testutil.ToFloat64(tb.m.trackedBytes); got != float64(acct) {
			t.Fatalf("bucket %d: tracked_bytes = %v, accounted %d", b, got, acct)
		}
		tb.sweep(now.Add(c.Bucket - 1))
		now = now.Add(c.Bucket)
		if b%10 == 9 {
			heap := heapAlloc() - base
			peak = max(peak, heap)
			if heap > maxBytes*105/100 {
				t.Fatalf("%d s: heap grew %d bytes, bound %d (+5%%)", b/10+1, heap, maxBytes)
			}
		}
	}
	runtime.KeepAlive(tb)
	evicted := testutil.ToFloat64(tb.m.evicted.WithLabelValues("cap_bytes"))
	t.Logf("%d keys in %d s of the clock: %d tracked (%d hot), %d bytes accounted, heap peak %d, %v evicted, %v refused",
		seconds*10*perBucket, seconds, len(tb.entries), len(tb.apps["app"].hot), tb.bytes, peak, evicted,
		testutil.ToFloat64(tb.m.evicted.WithLabelValues("refused")))
	if len(tb.apps["app"].hot) != seconds {
		t.Errorf("%d hot keys, want %d: the bound evicted or refused a hot key", len(tb.apps["app"].hot), seconds)
	}
	if evicted == 0 || tb.bytes < maxBytes*9/10 {
		t.Errorf("%v evictions, %d bytes tracked: the bound was never reached", evicted, tb.bytes)
	}
}
