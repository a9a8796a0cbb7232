package detector

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

const tBucket = int64(100 * time.Millisecond)

// sums flushes c and returns the forwarded counts by "app/key".
func sums(c *counter, final bool) map[string]uint64 {
	out := map[string]uint64{}
	for _, x := range c.flush(nil, final) {
		out[x.App+"/"+x.Key] += x.N
	}
	return out
}

func TestCounterForwardsWithFilterOff(t *testing.T) {
	c := newCounter(tBucket, 10, 1000, 1<<20)
	c.advance(0)
	c.add([]byte("a"), []byte("k1"), 5)
	c.add([]byte("a"), []byte("k1"), 2)
	c.add([]byte("b"), []byte("k1"), 1)
	got := sums(c, false)
	want := map[string]uint64{"a/k1": 7, "b/k1": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first flush: got %v, want %v", got, want)
	}
	if got := sums(c, false); len(got) != 0 {
		t.Fatalf("second flush without accesses: got %v, want nothing", got)
	}
	c.add([]byte("a"), []byte("k1"), 3)
	if got, want := sums(c, false), map[string]uint64{"a/k1": 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("third flush: got %v, want %v (deltas, not totals)", got, want)
	}
}

func TestCounterExpiresKeysAfterWindow(t *testing.T) {
	// Window 10 buckets: a key touched in bucket 0 stays while bucket 0 is
	// in the window (through bucket 10, which closes with a window of 11
	// buckets) and is gone once bucket 11 opens.
	c := newCounter(tBucket, 10, 1000, 1<<20)
	c.advance(0)
	c.add(nil, []byte("k"), 1)
	sums(c, false)
	for _, tc := range []struct {
		bucket int64
		want   int
	}{{1, 1}, {5, 1}, {10, 1}, {11, 0}} {
		c.advance(tc.bucket * tBucket)
		if got := c.len(); got != tc.want {
			t.Fatalf("keys at bucket %d: got %d, want %d", tc.bucket, got, tc.want)
		}
	}
	if got := c.index.len(); got != 0 {
		t.Fatalf("index after expiry: got %d entries, want 0", got)
	}
	// A key that keeps arriving stays.
	c.add(nil, []byte("k"), 1)
	for b := int64(12); b < 40; b++ {
		c.advance(b * tBucket)
		c.add(nil, []byte("k"), 1)
	}
	if got := c.len(); got != 1 {
		t.Fatalf("busy key: got %d keys, want 1", got)
	}
}

func TestCounterBigClockJumpExpiresAll(t *testing.T) {
	c := newCounter(tBucket, 10, 1000, 1<<20)
	c.advance(0)
	for i := range 100 {
		c.add(nil, fmt.Appendf(nil, "k%d", i), 1)
	}
	sums(c, false)
	c.advance(1000 * tBucket)
	if got := c.len(); got != 0 {
		t.Fatalf("after a jump of 1000 buckets: got %d keys, want 0", got)
	}
	c.advance(500 * tBucket) // backwards: ignored
	c.add(nil, []byte("x"), 1)
	if got := sums(c, false); got["/x"] != 1 {
		t.Fatalf("after a backward clock: got %v, want /x:1", got)
	}
}

func TestCounterFilter(t *testing.T) {
	// cutoff 10: a key is forwarded once its count over the window
	// (10 buckets + the open one) reaches 10.
	type step struct {
		bucket int64
		n      uint64
	}
	tests := []struct {
		name         string
		steps        []step
		wantFwd      uint64
		wantFiltered uint64
	}{
		{"under cutoff in one bucket", []step{{0, 9}}, 0, 9},
		{"at cutoff in one bucket", []step{{0, 10}}, 10, 0},
		{"reaches cutoff in the next bucket", []step{{0, 5}, {1, 5}}, 5, 5},
		{"reaches cutoff across the window", []step{{0, 4}, {5, 3}, {10, 3}}, 3, 7},
		{"earlier counts expired", []step{{0, 5}, {11, 5}}, 0, 10},
		{"stays forwarded while above", []step{{0, 10}, {1, 1}, {2, 1}}, 12, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter(tBucket, 10, 1000, 1<<20)
			c.cutoff = 10
			c.advance(0)
			var fwd uint64
			for _, s := range tc.steps {
				c.advance(s.bucket * tBucket)
				fwd += sums(c, false)["/k"]
				c.add(nil, []byte("k"), s.n)
			}
			c.advance(1000 * tBucket)
			fwd += sums(c, false)["/k"]
			if st := c.takeStats(); fwd != tc.wantFwd || st.filtered != tc.wantFiltered {
				t.Fatalf("forwarded %d, filtered %d; want %d, %d", fwd, st.filtered, tc.wantFwd, tc.wantFiltered)
			}
		})
	}
}

func TestCounterFlushForwardsEarlyAndFinal(t *testing.T) {
	c := newCounter(tBucket, 10, 1000, 1<<20)
	c.cutoff = 10
	c.advance(0)
	c.add(nil, []byte("hot"), 12)
	c.add(nil, []byte("cold"), 3)
	// Mid-bucket: the hot key is already at the cutoff, the cold one is
	// undecided and waits for the bucket to close.
	if got, want := sums(c, false), map[string]uint64{"/hot": 12}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("mid-bucket flush: got %v, want %v", got, want)
	}
	c.add(nil, []byte("cold"), 8) // window 11: forwarded with its earlier 3
	c.add(nil, []byte("warm"), 4)
	if got, want := sums(c, true), map[string]uint64{"/cold": 11}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("final flush: got %v, want %v", got, want)
	}
	if st := c.takeStats(); st.filtered != 4 {
		t.Fatalf("final flush filtered %d, want 4 (warm)", st.filtered)
	}
}

// TestCounterFilterLossBound checks the documented guarantee: the accesses of
// one key that the filter drops in any Window+Bucket span of buckets (any
// interval of length Window meets at most that many) add up to less than the
// cutoff, whatever the arrival pattern.
func TestCounterFilterLossBound(t *testing.T) {
	const nBuckets, cutoff = 10, 50
	var worst uint64
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := newCounter(tBucket, nBuckets, 1000, 1<<20)
		c.cutoff = cutoff
		c.advance(0)
		const total = 2000
		arrived := make([]uint64, total)
		fwd := make([]uint64, total)
		rate := rng.IntN(12) // mean accesses per bucket, around cutoff/(nBuckets+1)
		for b := range int64(total) {
			c.advance(b * tBucket)
			// After the close of bucket b-1, the flush holds exactly its
			// forwarded accesses (the new bucket is still empty).
			if b > 0 {
				fwd[b-1] = sums(c, false)["/k"]
			}
			if rng.IntN(50) == 0 {
				rate = rng.IntN(12)
			}
			n := uint64(rng.IntN(2*rate + 1))
			if rng.IntN(100) == 0 {
				n = uint64(rng.IntN(2 * cutoff)) // bursts
			}
			if n > 0 {
				c.add(nil, []byte("k"), n)
			}
			arrived[b] = n
		}
		var dropped, forwarded uint64
		for b := 0; b < total-1; b++ {
			if fwd[b] > arrived[b] {
				t.Fatalf("seed %d bucket %d: forwarded %d > arrived %d", seed, b, fwd[b], arrived[b])
			}
			forwarded += fwd[b]
		}
		for b := 0; b+nBuckets+1 <= total-1; b++ {
			var lost uint64
			for j := b; j < b+nBuckets+1; j++ {
				lost += arrived[j] - fwd[j]
			}
			if lost >= cutoff {
				t.Fatalf("seed %d: buckets %d..%d lost %d accesses, want < %d", seed, b, b+nBuckets, lost, cutoff)
			}
			dropped = max(dropped, lost)
		}
		if forwarded == 0 {
			t.Fatalf("seed %d: nothing forwarded", seed)
		}
		worst = max(worst, dropped)
	}
	// The arrival pattern must push the filter near its bound, or this test
	// could not fail.
	if worst < cutoff/2 {
		t.Fatalf("worst loss %d: the test never came near the bound %d", worst, cutoff)
	}
	t.Logf("worst loss over any %d buckets: %d (bound < %d)", nBuckets+1, worst, cutoff)
}

func TestCounterCapHoldsAndAdmitsBusyKeys(t *testing.T) {
	const maxKeys = 64
	c := newCounter(tBucket, 10, maxKeys, 1<<20)
	c.cutoff = 5
	c.advance(0)
	for i := range 10_000 {
		c.add(nil, fmt.Appendf(nil, "flood-%d", i), 1)
		if c.len() > maxKeys {
			t.Fatalf("after %d keys: %d tracked, cap %d", i+1, c.len(), maxKeys)
		}
	}
	// A busy key arriving into the full table: the sketch admits it once
	// its estimate reaches the cutoff plus the noise floor; fewer accesses
	// than that are lost.
	floor := c.sk.floor()
	for range 100 {
		c.add(nil, []byte("busy"), 1)
	}
	got := sums(c, false)["/busy"]
	if lost := 100 - got; got > 100 || lost >= c.cutoff+floor {
		t.Fatalf("busy key forwarded %d of 100; want fewer than cutoff %d + floor %d lost", got, c.cutoff, floor)
	}
	t.Logf("busy key: %d of 100 forwarded (cutoff %d, noise floor %d)", got, c.cutoff, floor)
	st := c.takeStats()
	if st.capDropped == 0 || st.admitted == 0 {
		t.Fatalf("stats %+v: want cap drops and admissions", st)
	}
	if c.len() > maxKeys {
		t.Fatalf("%d keys tracked, cap %d", c.len(), maxKeys)
	}
	// The flood expires and the table empties.
	c.advance(100 * tBucket)
	sums(c, false)
	if c.len() != 0 || c.keyBytes != 0 {
		t.Fatalf("after expiry: %d keys, %d key bytes; want 0, 0", c.len(), c.keyBytes)
	}
}

func TestCounterByteCap(t *testing.T) {
	const maxBytes = 10_000
	c := newCounter(tBucket, 10, 1_000_000, maxBytes)
	c.advance(0)
	long := strings.Repeat("x", 1000)
	for i := range 100 {
		c.add([]byte("app"), fmt.Appendf(nil, "%s-%d", long, i), 1)
		if c.keyBytes > maxBytes {
			t.Fatalf("after %d keys: %d key bytes, cap %d", i+1, c.keyBytes, maxBytes)
		}
	}
	if c.len() == 0 || c.len() > 10 {
		t.Fatalf("%d long keys tracked, want 1..10", c.len())
	}
}

func TestSplitKey(t *testing.T) {
	for _, app := range []string{"", "a", strings.Repeat("p", 127), strings.Repeat("q", 128), strings.Repeat("r", 5000)} {
		for _, key := range []string{"k", "", strings.Repeat("k", 300)} {
			c := newCounter(tBucket, 10, 10, 1<<20)
			c.advance(0)
			c.add([]byte(app), []byte(key), 1)
			got := c.flush(nil, false)
			if len(got) != 1 || got[0].App != app || got[0].Key != key {
				t.Fatalf("app len %d, key len %d: got %d counts, first %.20q/%.20q", len(app), len(key), len(got), got[0].App, got[0].Key)
			}
		}
	}
}

func TestCounterSaturates(t *testing.T) {
	c := newCounter(tBucket, 10, 10, 1<<20)
	c.advance(0)
	c.add(nil, []byte("k"), 1<<63)
	c.add(nil, []byte("k"), 1<<63)
	c.add(nil, []byte("k"), 1<<63)
	if got := c.flush(nil, false); len(got) != 1 || got[0].N != 1<<64-1 {
		t.Fatalf("got %v, want one count saturated at 2^64-1", got)
	}
	c.advance(20 * tBucket)
	if c.len() != 0 {
		t.Fatalf("saturated key did not expire: %d keys", c.len())
	}
}

func TestCounterSteadyStateAllocs(t *testing.T) {
	c := newCounter(tBucket, 10, 1<<16, 1<<24)
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "item:%d", i)
	}
	app := []byte("shop")
	now := int64(0)
	buf := make([]Count, 0, 2000)
	step := func() {
		now += int64(time.Millisecond)
		c.advance(now)
		for _, k := range keys {
			c.add(app, k, 1)
		}
		if now%int64(100*time.Millisecond) == 0 {
			buf = c.flush(buf[:0], false)
		}
	}
	for range 3000 { // grow every buffer first
		step()
	}
	if got := testing.AllocsPerRun(500, step); got != 0 {
		t.Fatalf("steady state: %v allocations per step of %d updates, want 0", got, len(keys))
	}
}

func TestCutoff(t *testing.T) {
	tests := []struct {
		alpha, threshold float64
		window           time.Duration
		d, p             int
		want             uint64
	}{
		{0.05, 1000, time.Second, 1, 1, 50},
		{0.05, 1000, time.Second, 1, 4, 13}, // 12.5 rounds up
		{0.05, 1000, time.Second, 2, 4, 7},  // 6.25
		{0.05, 1000, time.Second, 10, 10, 1},
		{0.05, 1000, 2 * time.Second, 1, 4, 25},
		{0.05, 1000, time.Second, 0, 0, 50},   // D and P of 0 count as 1
		{-1, 1000, time.Second, 1, 1, 0},      // filter off
		{1, 1e12, time.Second, 1, 1, 1 << 24}, // saturated: 2^32-1 of weight
	}
	for _, tc := range tests {
		// The cutoff is in weight (unit per access of an app without
		// rules); want is the accesses it takes to reach it.
		cfg := Config{Alpha: tc.alpha, Threshold: tc.threshold, Window: tc.window}
		if got := (cfg.cutoff(tc.d, tc.p) + unit - 1) / unit; got != tc.want {
			t.Errorf("cutoff(alpha %v, T %v, W %v, D %d, P %d) = %d accesses, want %d", tc.alpha, tc.threshold, tc.window, tc.d, tc.p, got, tc.want)
		}
	}
}

func TestSketchNeverUnderestimates(t *testing.T) {
	s := newSketch(2048)
	seed := maphash.MakeSeed()
	hash := func(k string) uint64 { return maphash.String(seed, k) }
	rng := rand.New(rand.NewPCG(1, 2))
	truth := map[string]uint64{}
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	for range 50_000 {
		k := keys[rng.IntN(len(keys))]
		truth[k]++
		if est := s.add(hash(k), 1); est < truth[k] {
			t.Fatalf("%s: estimate %d < true %d", k, est, truth[k])
		}
	}
	s.rotate()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range truth {
			if !yield(k) {
				return
			}
		}
	})[:100] {
		if est := s.add(hash(k), 1); est < truth[k]+1 {
			t.Fatalf("after one rotation %s: estimate %d < true %d", k, est, truth[k]+1)
		}
	}
	s.rotate()
	s.rotate()
	if est := s.add(hash("key-1"), 1); est != 1 {
		t.Fatalf("after two rotations: estimate %d, want 1", est)
	}
}

// TestCounterQueueMatchesAdd feeds the same accesses to one counter through
// add and to another through queue (drained by advance, flush, or a full
// queue): every flush must forward the same counts and the filter drop the
// same accesses, since queued accesses belong to the bucket open when they
// were queued.
func TestCounterQueueMatchesAdd(t *testing.T) {
	direct := newCounter(tBucket, 10, 2000, 1<<20)
	queued := newCounter(tBucket, 10, 2000, 1<<20)
	for _, c := range []*counter{direct, queued} {
		c.cutoff = 5
	}
	rng := rand.New(rand.NewPCG(5, 6))
	now := int64(0)
	var gotBuf, wantBuf []Count
	for step := range 20_000 {
		if step%97 == 0 {
			now += int64(rng.IntN(3)) * tBucket / 2
			direct.advance(now)
			queued.advance(now)
		}
		app := []byte(fmt.Sprintf("app%d", rng.IntN(3)))
		key := []byte(fmt.Sprintf("k%d", int(rng.ExpFloat64()*300)))
		n := uint64(1 + rng.IntN(3))
		direct.add(app, key, n)
		queued.queue(app, key, n, n)
		if step%251 == 0 {
			final := step%5000 == 0
			want := sums(direct, final)
			got := sums(queued, final)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: queued forwarded %v, direct %v", step, got, want)
			}
			if g, w := queued.takeStats(), direct.takeStats(); g != w {
				t.Fatalf("step %d: queued stats %+v, direct %+v", step, g, w)
			}
			if queued.len() != direct.len() {
				t.Fatalf("step %d: queued tracks %d keys, direct %d", step, queued.len(), direct.len())
			}
		}
	}
	gotBuf, wantBuf = queued.flush(gotBuf, false), direct.flush(wantBuf, false)
	if len(gotBuf) != len(wantBuf) {
		t.Fatalf("last flush: %d counts queued, %d direct", len(gotBuf), len(wantBuf))
	}
}

func TestCounterQueueSteadyStateAllocs(t *testing.T) {
	c := newCounter(tBucket, 10, 1<<16, 1<<24)
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "item:%d", i)
	}
	app := []byte("shop")
	now := int64(0)
	buf := make([]Count, 0, 2000)
	step := func() {
		now += int64(time.Millisecond)
		c.advance(now)
		for i, k := range keys {
			// Half the keys carry bytes, a quarter are written too.
			e := wire.Entry{App: app, Key: k, Count: 1, Bytes: uint64(i&1) * 100, Op: wire.Op(i & 3 / 3)}
			c.count(&e, appWeights{access: unit, perByte: 1 << 30})
		}
		if now%int64(100*time.Millisecond) == 0 {
			buf = c.flush(buf[:0], false)
		}
	}
	for range 3000 {
		step()
	}
	if got := testing.AllocsPerRun(500, step); got != 0 {
		t.Fatalf("steady state: %v allocations per step of %d queued updates, want 0", got, len(keys))
	}
}

// TestCounterTurning checks when a key asks for an early round: at the
// access that gives it, in the open bucket, a bucket's worth at the
// threshold (bucketHot) and, in its window, its next ask level (this
// partition's share of a hot window, windowShare; the geometric mean of
// that and a whole hot window; a whole hot window, windowHot), unless its
// window held a whole hot window already before that access; once per
// level, until its window fell below 4/5 of its share.
func TestCounterTurning(t *testing.T) {
	type step struct {
		bucket int64
		key    string
		n      uint64
		want   bool
	}
	for _, tc := range []struct {
		name                            string
		bucketHot, windowShare, windowH uint64 // levels 20, 31, 50 or 20, 40, 80
		steps                           []step
	}{
		{"a big entry turns a cold key hot", 10, 20, 50, []step{
			{0, "k", 25, true},
			{1, "k", 5, false}, // under a bucket's worth, and the next level
		}},
		{"a bucket's worth below the window share waits for it", 10, 20, 50, []step{
			{0, "k", 12, false}, // bucket 12 >= 10, window 12 < 20
			{0, "k", 3, false},  // window 15
			{0, "k", 6, true},   // window 21 >= 20
			{0, "k", 6, false},  // window 27, under the next level
		}},
		{"a window over the share waits for a bucket's worth", 10, 20, 50, []step{
			{0, "k", 9, false},
			{1, "k", 9, false},
			{2, "k", 9, false}, // window 27 >= 20, bucket 9 < 10
			{2, "k", 1, true},  // bucket 10
		}},
		{"a key hot on this partition alone asks no more", 10, 20, 50, []step{
			{0, "k", 30, true},
			{1, "k", 30, true},  // window 60, past the last two levels: one ask
			{2, "k", 30, false}, // window 60 before
			{3, "k", 30, false},
		}},
		{"a key asks at its share, the middle level and a whole hot window", 10, 20, 80, []step{
			{0, "k", 25, true},  // 25 >= 20
			{1, "k", 25, true},  // 50 >= 40
			{2, "k", 25, false}, // 75
			{3, "k", 25, true},  // 100 >= 80
			{4, "k", 25, false},
		}},
		{"a key that passes two levels at once asks once", 10, 20, 80, []step{
			{0, "k", 45, true},  // 45 >= 40
			{1, "k", 10, false}, // 55
			{2, "k", 30, true},  // 85 >= 80
		}},
		{"a bucket that reaches two levels asks at each", 10, 20, 80, []step{
			{0, "k", 25, true},
			{0, "k", 25, true}, // 50 >= 40
			{0, "k", 5, false},
		}},
		{"a key asks again once its window fell below 4/5 of its share", 10, 20, 80, []step{
			{0, "k", 25, true},
			{1, "k", 25, true},
			{2, "k", 25, false},
			{20, "k", 25, true}, // its window expired in between
		}},
		{"a key that stays above 4/5 of its share does not", 10, 20, 1000, []step{
			{0, "k", 4, false},
			{1, "k", 18, true}, // window 22
			{2, "k", 10, false},
			{3, "k", 10, false},
			{12, "k", 10, false}, // buckets 0 and 1 expired: 20, not under 16; then 30
			{13, "k", 10, false}, // bucket 2 expired: 20; then 30
		}},
		{"with one partition and detector the levels are one", 10, 50, 50, []step{
			{0, "k", 25, false},
			{1, "k", 25, true}, // 50
			{2, "k", 25, false},
		}},
		{"keys are judged on their own", 10, 20, 50, []step{
			{0, "a", 25, true},
			{0, "b", 9, false},
			{0, "b", 25, true},
		}},
		{"off when bucketHot is 0", 0, 0, 0, []step{
			{0, "k", 1000, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter(tBucket, 10, 1000, 1<<20)
			c.bucketHot, c.windowHot = tc.bucketHot, tc.windowH
			c.setShare(tc.windowShare)
			for i, s := range tc.steps {
				c.advance(s.bucket * tBucket)
				c.add(nil, []byte(s.key), s.n)
				if got := c.takeEarly(); got != s.want {
					t.Fatalf("step %d (bucket %d, %s +%d): early %v, want %v", i, s.bucket, s.key, s.n, got, s.want)
				}
			}
		})
	}
}
