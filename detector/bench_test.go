package detector

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// cpuTime is the CPU time this process has used (user + system). On a
// shared machine, accesses per CPU second describe the code better than
// accesses per wall-clock second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// zipfKeys returns n key indexes drawn from a Zipf law (s=1.1) over
// distinct keys.
func zipfKeys(n, distinct int) []int {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, uint64(distinct-1))
	out := make([]int, n)
	for i := range out {
		out[i] = int(z.Uint64())
	}
	return out
}

// BenchmarkCounterZipf measures the counting core: one (key, count) update
// into a partition's windowed counter, with the clock advancing 1ms per
// 4096 updates (about 4M updates per simulated second) and a flush every
// simulated 100ms, so bucket closes, expiries and flushes are included.
// The keys (100k distinct, Zipf s=1.1) are laid out one after the other, as
// a decoded record would present them.
func BenchmarkCounterZipf(b *testing.B) {
	const distinct, n = 100_000, 1 << 20
	var arena []byte
	ends := make([]uint32, n)
	for i, k := range zipfKeys(n, distinct) {
		arena = strconv.AppendInt(append(arena, "item:"...), int64(k), 10)
		ends[i] = uint32(len(arena))
	}
	app := []byte("shop")
	for _, bc := range []struct {
		name   string
		cutoff uint64
	}{{"filter-off", 0}, {"cutoff-13", 13}} {
		b.Run(bc.name, func(b *testing.B) {
			c := newCounter(int64(100*time.Millisecond), 10, DefaultMaxKeys, DefaultMaxKeyBytes)
			c.cutoff = bc.cutoff
			// A detector's defaults, in this benchmark's weight of 1 per
			// access: keys turning hot are looked for, as in a worker.
			c.bucketHot, c.windowHot = 100, 1000
			c.setShare(1000)
			var buf []Count
			now := int64(0)
			start := uint32(0)
			step := func(i int) {
				j := i & (n - 1)
				if i&4095 == 0 {
					now += int64(time.Millisecond)
					c.advance(now)
					if now%int64(100*time.Millisecond) == 0 {
						buf = c.flush(buf[:0], false)
					}
				}
				if j == 0 {
					start = 0
				}
				c.add(app, arena[start:ends[j]], 1)
				start = ends[j]
			}
			for i := range 1 << 22 { // warm up: every key seen, buffers grown
				step(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			t0, cpu0 := time.Now(), cpuTime()
			for i := 0; b.Loop(); i++ {
				step(i)
			}
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "updates/s")
			b.ReportMetric(float64(b.N)/(cpuTime()-cpu0).Seconds(), "updates/cpu-s")
		})
	}
}

// BenchmarkDecodeAndCount measures a worker's per-record path: decoding the
// SDK's binary batch (100 entries) and counting every entry, no app having
// rules.
func BenchmarkDecodeAndCount(b *testing.B) { benchDecodeAndCount(b, nil, 1, 0) }

// BenchmarkDecodeAndCountV2 is BenchmarkDecodeAndCount on version 2
// batches (op and bytes per entry), which the SDK wrote before sources.
func BenchmarkDecodeAndCountV2(b *testing.B) { benchDecodeAndCount(b, nil, 2, 0) }

// BenchmarkDecodeAndCountSources is BenchmarkDecodeAndCountV2 with sources:
// version 3 batches, each from one of 4 instances, so that the keys near
// the threshold have their sources tracked.
func BenchmarkDecodeAndCountSources(b *testing.B) { benchDecodeAndCount(b, nil, 3, 4) }

// BenchmarkDecodeAndCountSources100 is BenchmarkDecodeAndCountSources with
// 100 instances, as `hotspot bench --sources 100` sends: every key near the
// threshold has more sources than a round's list holds.
func BenchmarkDecodeAndCountSources100(b *testing.B) { benchDecodeAndCount(b, nil, 3, 100) }

// BenchmarkDecodeAndCountRules is BenchmarkDecodeAndCount with rules for
// the batches' app and nine others: each entry's app is looked up.
func BenchmarkDecodeAndCountRules(b *testing.B) {
	t := &weightTable{apps: map[string]appWeights{"shop": {access: 3 * unit, perByte: 1 << 20}}}
	for i := range 9 {
		t.apps["app-"+strconv.Itoa(i)] = appWeights{access: 2 * unit}
	}
	benchDecodeAndCount(b, t, 1, 0)
}

// benchDecodeAndCount runs the batches of the given version (1 to 3);
// those of version 3 come from the given number of instances in turn.
func benchDecodeAndCount(b *testing.B, t *weightTable, version, instances int) {
	const distinct = 100_000
	seq := zipfKeys(100*1000, distinct)
	recs := make([][]byte, 1000)
	for i := range recs {
		es := make([]wire.KeyCount, 100)
		as := make([]wire.Access, 100)
		for j := range es {
			es[j] = wire.KeyCount{Key: "item:" + strconv.Itoa(seq[i*100+j]), Count: 1}
			as[j] = wire.Access{Key: es[j].Key, Count: 1}
		}
		switch version {
		case 1:
			recs[i] = wire.AppendBatch(nil, "shop", 1_700_000_000_000, es)
		case 2:
			recs[i] = wire.AppendAccesses(nil, "shop", 1_700_000_000_000, as)
		case 3:
			recs[i] = wire.AppendAccessesFrom(nil, "shop", "inst-"+strconv.Itoa(i%instances), 1_700_000_000_000, as)
		}
	}
	c := newCounter(int64(100*time.Millisecond), 10, DefaultMaxKeys, DefaultMaxKeyBytes)
	c.cutoff = 13 * unit
	c.bucketHot, c.windowHot = 100*unit, 1000*unit // a detector's defaults
	c.setShare(1000 * unit)
	dec := wire.Decoder{}
	var wg weigher
	wg.reset(t)
	add := func(e *wire.Entry) { c.count(e, wg.of(e.App)) } // as the worker does
	var buf []Count
	var srcs []KeySources
	now := int64(0)
	step := func(i int) {
		if i&31 == 0 { // 3200 entries per simulated ms
			now += int64(time.Millisecond)
			c.advance(now)
			if now%int64(100*time.Millisecond) == 0 {
				buf = c.flush(buf[:0], false)
				srcs = c.takeSources(srcs[:0], now, false)
			}
		}
		if err := dec.Decode(recs[i%len(recs)], add); err != nil {
			b.Fatal(err)
		}
		c.drainBig() // as the worker does after each record
		c.takeEarly()
	}
	for i := range 50_000 {
		step(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime()
	for i := 0; b.Loop(); i++ {
		step(i)
	}
	b.ReportMetric(float64(b.N*100)/time.Since(t0).Seconds(), "entries/s")
	b.ReportMetric(float64(b.N*100)/(cpuTime()-cpu0).Seconds(), "entries/cpu-s")
}

// BenchmarkDecodeAndCountOneOff is BenchmarkDecodeAndCount on the counting
// of `hotspot bench --rate 2000000 --keys 100000000 --skew 0.2`: nearly every
// key is seen once, so one partition of two (1M entries per simulated
// second, the default cap's half) keeps its table full, and every new key
// asks the admission sketch.
func BenchmarkDecodeAndCountOneOff(b *testing.B) {
	const perRecord, records = 1000, 4096 // 4M distinct keys: 4 simulated seconds before one comes back
	recs := make([][]byte, records)
	es := make([]wire.KeyCount, perRecord)
	for i := range recs {
		for j := range es {
			es[j] = wire.KeyCount{Key: "k:" + strconv.Itoa(i*perRecord+j), Count: 1}
		}
		recs[i] = wire.AppendBatch(nil, "shop", 1_700_000_000_000, es)
	}
	cfg, err := Config{Source: newFakeSource(newFakeTopic(1))}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	c := newCounter(int64(cfg.Bucket), int(cfg.Window/cfg.Bucket), cfg.MaxKeys/2, cfg.MaxKeyBytes/2)
	c.cutoff = cfg.cutoff(1, 2)
	c.bucketHot, c.windowHot = cfg.hotWeight(cfg.Bucket), cfg.hotWeight(cfg.Window)
	c.setShare(cfg.windowShare(1, 2))
	dec := wire.Decoder{}
	add := func(e *wire.Entry) { c.count(e, defaultWeights) }
	var buf []Count
	now := int64(0)
	step := func(i int) { // one record: 1 simulated ms
		now += int64(time.Millisecond)
		c.advance(now)
		if now%int64(100*time.Millisecond) == 0 {
			buf = c.flush(buf[:0], false)
		}
		if err := dec.Decode(recs[i%records], add); err != nil {
			b.Fatal(err)
		}
		c.drainBig()
		c.takeEarly()
	}
	for i := range 3000 { // table full, sketch in use
		step(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime()
	for i := 3000; b.Loop(); i++ {
		step(i)
	}
	b.ReportMetric(float64(b.N*perRecord)/time.Since(t0).Seconds(), "entries/s")
	b.ReportMetric(float64(b.N*perRecord)/(cpuTime()-cpu0).Seconds(), "entries/cpu-s")
	b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N*perRecord), "ns/entry")
}

// churn feeds one counter perSecond new distinct keys (each accessed once,
// the worst case for memory) plus a Zipf-distributed hot set, for seconds
// simulated seconds, and returns the largest live heap and key count seen
// (heap measured after a GC at the end of every simulated second).
func churn(tb testing.TB, perSecond, seconds, maxKeys int, cutoff uint64) (heapMax uint64, keysMax int, st counterStats) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	c := newCounter(int64(100*time.Millisecond), 10, maxKeys, DefaultMaxKeyBytes)
	c.cutoff = cutoff
	hot := zipfKeys(1<<16, 10_000)
	var buf []Count
	key := make([]byte, 0, 64)
	app := []byte("shop")
	id := uint64(0)
	const ticks = 100 // per simulated second: one per 10ms
	for s := range seconds {
		for tick := range ticks {
			now := int64(s)*int64(time.Second) + int64(tick)*int64(10*time.Millisecond)
			c.advance(now)
			if tick%10 == 0 {
				buf = c.flush(buf[:0], false)
			}
			for range perSecond / ticks {
				id++
				key = fmt.Appendf(key[:0], "user:%d:session:%016x", id%1000, id*0x9e3779b97f4a7c15)
				c.add(app, key, 1)
				c.add(app, []byte("item:"+strconv.Itoa(hot[id&(1<<16-1)])), 1)
			}
		}
		keysMax = max(keysMax, c.len())
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heapMax = max(heapMax, ms.HeapAlloc-min(base, ms.HeapAlloc))
		st.filtered += c.stats.filtered
		st.capDropped += c.stats.capDropped
		st.admitted += c.stats.admitted
		c.stats = counterStats{}
	}
	runtime.KeepAlive(c)
	return heapMax, keysMax, st
}

// BenchmarkMemoryTenMillionKeysPerMinute runs one simulated minute of 10M
// distinct keys (167k new keys per second) through one counter and reports
// the live heap it holds, with the default cap and with a cap 10x smaller
// than the live key set.
func BenchmarkMemoryTenMillionKeysPerMinute(b *testing.B) {
	for _, bc := range []struct {
		name    string
		maxKeys int
	}{{"default-cap", DefaultMaxKeys}, {"cap-20k", 20_000}} {
		b.Run(bc.name, func(b *testing.B) {
			var heap uint64
			var keys int
			var st counterStats
			for b.Loop() {
				heap, keys, st = churn(b, 10_000_000/60, 60, bc.maxKeys, 13)
			}
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(keys), "keys-max")
			b.ReportMetric(float64(st.capDropped), "cap-dropped")
			b.ReportMetric(float64(st.admitted), "admitted")
		})
	}
}

// TestMemoryBounded runs a tenth of the benchmark's load (1M distinct keys
// per simulated minute, over 20 seconds) and checks that the live heap stays
// within the documented per-key bound and the key cap holds.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("memory test skipped in -short")
	}
	const perSecond = 1_000_000 / 60
	heap, keys, _ := churn(t, perSecond, 20, DefaultMaxKeys, 13)
	// Live keys: about (Window + Bucket + Bucket) * perSecond, plus the hot set.
	if want := perSecond*13/10 + 10_000; keys > want {
		t.Errorf("max keys %d, want <= %d", keys, want)
	}
	// docs/detector.md: at most 300 bytes per tracked key plus its bytes
	// (here 38-byte composite keys in 48-byte allocations).
	if limit := uint64(keys) * (300 + 48); heap > limit {
		t.Errorf("live heap %d bytes for %d keys (%.0f B/key), want <= %d", heap, keys, float64(heap)/float64(keys), limit)
	}
	t.Logf("1M keys/min: max %d keys, live heap %.1f MiB (%.0f B/key)", keys, float64(heap)/(1<<20), float64(heap)/float64(keys))

	heap, keys, st := churn(t, perSecond, 10, 5_000, 13)
	if keys > 5_000 {
		t.Errorf("cap 5000: max keys %d", keys)
	}
	if st.capDropped == 0 {
		t.Errorf("cap 5000 under 16k keys/s: nothing dropped, the cap was never reached")
	}
	t.Logf("cap 5000: max %d keys, live heap %.1f MiB, %d entries dropped, %d admitted", keys, float64(heap)/(1<<20), st.capDropped, st.admitted)
}

// TestMemoryWorstCasePerKey fills a counter to its cap with keys that are
// touched in every bucket of the window (the most touch-list memory a key
// can hold) while the sketch is allocated, and checks the documented
// per-key bound.
func TestMemoryWorstCasePerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("memory test skipped in -short")
	}
	const maxKeys = 100_000
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	c := newCounter(int64(100*time.Millisecond), 10, maxKeys, DefaultMaxKeyBytes)
	c.cutoff = 1 << 32 // nothing forwarded, nothing admitted: the table stays full
	keys := make([][]byte, maxKeys+maxKeys/10)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%d:session:%016x", i%1000, uint64(i)*0x9e3779b97f4a7c15)
	}
	var buf []Count
	for b := range int64(11) {
		c.advance(b * int64(100*time.Millisecond))
		for _, k := range keys { // the last tenth finds the table full
			c.add([]byte("shop"), k, 1)
		}
		buf = c.flush(buf[:0], false)
	}
	// Nothing reaches the cutoff, so the table fills to its soft limit (the
	// reserve is for keys the sketch admits) and the sketch is allocated.
	n := c.len()
	if n != c.softKeys || c.sk == nil {
		t.Fatalf("%d keys tracked (soft limit %d), sketch allocated %v: want a full table", n, c.softKeys, c.sk != nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	perKey := float64(ms.HeapAlloc-min(base, ms.HeapAlloc)) / float64(n)
	// The test's own keys slice is still counted: 24 B header + 48 B data
	// for 1.1*maxKeys keys; the bound is 300 B + the 48-byte key.
	own := 1.1 * maxKeys * (24 + 48) / float64(n)
	if limit := 300.0 + 48 + own; perKey > limit {
		t.Fatalf("%.0f bytes per key at the cap, want <= %.0f", perKey, limit)
	}
	t.Logf("worst case at the cap: %.0f bytes per key (includes %.0f of the test's own key slice)", perKey, own)
	runtime.KeepAlive(c)
	runtime.KeepAlive(keys)
}

// zipfPartition returns n key indexes drawn from a Zipf law of exponent s
// over distinct keys (s may be below 1, unlike rand.Zipf), keeping only the
// keys of one partition out of parts (index%parts == 0), as one partition's
// counter sees them.
func zipfPartition(n, distinct, parts int, s float64) []int {
	cdf := make([]float64, distinct)
	sum := 0.0
	for i := range cdf {
		sum += math.Pow(float64(i+1), -s)
		cdf[i] = sum
	}
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]int, 0, n)
	for len(out) < n {
		k, _ := slices.BinarySearch(cdf, r.Float64()*sum)
		if k%parts == 0 {
			out = append(out, k)
		}
	}
	return out
}

// BenchmarkCounterWorkload measures the counting core on the end-to-end
// workload of `hotspot bench --rate 2000000`: keys drawn from a Zipf law over
// 1M keys, of which one partition's counter sees an eighth (~125k keys), at
// 150k entries per simulated second per partition (2M events/s become about
// 1.2M entries/s over 8 partitions), with a flush every simulated 100ms.
// cutoff-7 is the default filter with 8 partitions and one detector. The
// bytes and writes variants give every access 512 bytes (and make every
// fourth a write), with a bytes rule weighing them.
func BenchmarkCounterWorkload(b *testing.B) {
	const n, perMS = 1 << 21, 150
	for _, bc := range []struct {
		name          string
		s             float64
		cutoff        uint64
		bytes, writes bool
	}{
		{"zipf-0.8/cutoff-7", 0.8, 7, false, false}, {"zipf-1.1/cutoff-7", 1.1, 7, false, false},
		{"zipf-0.8/filter-off", 0.8, 0, false, false},
		{"zipf-0.8/cutoff-7/bytes", 0.8, 7, true, false}, {"zipf-0.8/cutoff-7/bytes-writes", 0.8, 7, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var arena []byte
			ends := make([]uint32, n)
			for i, k := range zipfPartition(n, 1_000_000, 8, bc.s) {
				arena = strconv.AppendInt(append(arena, "item:"...), int64(k), 10)
				ends[i] = uint32(len(arena))
			}
			app := []byte("shop")
			c := newCounter(int64(100*time.Millisecond), 10, DefaultMaxKeys/8, DefaultMaxKeyBytes/8)
			c.cutoff = bc.cutoff * unit
			aw := defaultWeights
			e := wire.Entry{App: app, Count: 1}
			if bc.bytes {
				aw.perByte, aw.top = 1<<28, 1<<32-1 // a 512-byte access weighs 32 more (an eighth of an access)
				e.Bytes = 512
			}
			var buf []Count
			now := int64(0)
			start := uint32(0)
			step := func(i int) {
				j := i & (n - 1)
				if i%perMS == 0 {
					now += int64(time.Millisecond)
					c.advance(now)
					if now%int64(100*time.Millisecond) == 0 {
						buf = c.flush(buf[:0], false)
					}
				}
				if j == 0 {
					start = 0
				}
				e.Key = arena[start:ends[j]]
				if bc.writes {
					e.Op = wire.Op(j & 3 / 3) // every fourth access a write
				}
				c.count(&e, aw) // as the worker does
				start = ends[j]
			}
			for i := range n { // warm up: buffers grown, window full
				step(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			t0, cpu0 := time.Now(), cpuTime()
			for i := n; b.Loop(); i++ {
				step(i)
			}
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "updates/s")
			b.ReportMetric(float64(b.N)/(cpuTime()-cpu0).Seconds(), "updates/cpu-s")
			b.ReportMetric(float64(c.len()), "keys")
		})
	}
}

// BenchmarkSketchAdd measures one admission lookup of the sketch a full
// partition table consults for every new key (2M events/s of one-off keys
// keep it busy): the default cap's sketch, keys all distinct, hashed
// beforehand as the counter hashes each key once for its index.
func BenchmarkSketchAdd(b *testing.B) {
	s := newSketch(DefaultMaxKeys / 2)
	seed := maphash.MakeSeed()
	keys := make([]uint64, 1<<20)
	for i := range keys {
		keys[i] = maphash.Bytes(seed, strconv.AppendInt([]byte("item:"), int64(i)*7919, 10))
	}
	i, sum := 0, uint64(0)
	for b.Loop() {
		sum += s.add(keys[i&(len(keys)-1)], 1)
		i++
	}
	if sum == 0 {
		b.Fatal("no estimate")
	}
}
