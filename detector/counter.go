package detector

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// counter counts one partition's accesses per (app, key) over a sliding
// window and decides which of them to forward. It is owned by one goroutine
// and takes no lock.
//
// Time is cut into buckets of bucketNS. The window is the open bucket plus the
// nb-1 closed buckets before it (nb = Window/Bucket + 1), so when a bucket
// closes the window covers exactly Window+Bucket of arrivals ending there.
// Each bucket keeps a touch list: one (entry, count) pair per key that
// arrived in it. Closing a bucket walks its list and decides, for each key,
// whether the accesses it got in that bucket are forwarded (the key's window
// count is >= cutoff) or dropped; expiring the oldest bucket walks its list
// again to subtract its counts from the window. So every access costs O(1)
// and every touch is visited twice more, however many keys there are.
//
// The window counts weight, not accesses: each access arrives with the
// weight its app's rules give it (see weights.go; unit per access under the
// default rule), so that one cutoff serves every app. The accesses
// themselves, and the writes and bytes among them, are what is forwarded.
// Writes and bytes ride along in a side table (extras) that only keys which
// got any use: a read without bytes costs what it cost before they existed,
// and the filter decides a key's writes and bytes with its accesses.
//
// Memory is capped: at most maxKeys entries and maxBytes key bytes. The last
// eighth of either budget is a reserve: once the table is past the first
// seven eighths, a new key gets in only when a count-min sketch (which counts
// the accesses of keys left outside) estimates its window count at >= cutoff,
// so a flood of one-off keys cannot keep a busy new key out. The estimate
// must reach the cutoff plus the sketch's noise floor (its mean counter), so
// collisions alone do not admit a key.
type counter struct {
	bucketNS int64
	nb       int       // buckets in the ring: Window/Bucket + 1
	ring     [][]touch // touch lists; ring[open] is the open bucket
	open     int
	seq      int64 // number of the open bucket (time / bucketNS)
	started  bool

	index   index // composite key -> entries index
	hseed   maphash.Seed
	entries []entry
	free    []uint32 // unused entries indexes
	extras  []extra  // writes and bytes of the entries whose ext points here
	freeExt []uint32 // unused extras indexes
	fwd     []uint32 // entries with fwd > 0, in the order they got it
	live    int      // entries in use

	cutoff uint64 // forward a key whose window weight is >= cutoff; 0 forwards all

	// A key turning hot asks for an early round (see turning): the weight
	// of Threshold × Bucket accesses (bucketHot) and of Threshold × Window
	// accesses (windowHot), the latter split over the D detectors and P
	// partitions (windowShare; set with setShare). bucketHot 0: never.
	bucketHot, windowHot, windowShare uint64
	// The window weights at which a key asks, one per ask (setShare); the
	// last is never reached.
	askAt     [maxAsks + 1]uint64
	bigQueued bool // an access of weight >= bucketHot waits in the queue
	early     bool // a key turned hot since the owner last looked (takeEarly)

	maxKeys, softKeys   int // softKeys: above it, new keys need the sketch's admission
	maxBytes, softBytes int
	keyBytes            int // bytes of the composite keys held
	sk                  *sketch
	skStart             int64 // bucket at which the sketch's current generation began

	// Sources of keys near the threshold (sources.go): a key is tracked
	// once its window reaches srcMark, half of windowShare.
	srcMark  uint64
	srcSec   int64         // the second of the clock of the last round (takeSources)
	trackers []*srcTracker // by entry.src-1; nil: free
	freeSrc  []uint32

	kbuf []byte
	q    accessQueue // accesses queued for drain
	sink uint64      // keeps drain's cache-warming loads from being optimized away

	stats counterStats
}

// counterStats are totals since the owner last took them.
type counterStats struct {
	filtered   uint64 // accesses dropped by the filter
	capDropped uint64 // (key, count) entries not counted: the table was full
	admitted   uint64 // keys let into the reserve by the sketch
}

type entry struct {
	key    string // uvarint(len(app)) + app + key; "" when unused
	hash   uint64 // maphash of key, computed once per access
	window uint64 // sum of the live buckets' weights (each clamped to 2^32-1)
	pend   uint64 // accesses of the open bucket not yet decided on
	fwd    uint64 // accesses decided to be forwarded at the next flush
	cur    uint32 // the open bucket's weight (saturating; includes an admission seed)
	seq    uint32 // the bucket in which the key was last touched (low bits), and its asks (see seqBits)
	slot   uint32 // the key's position in that bucket's touch list
	ext    uint32 // 1 + index of the key's extras; 0: none (only reads without bytes so far)
	src    uint32 // 1 + index of the key's source tracker; 0: none (not near the threshold)
}

// entry.seq holds the low bits of a bucket number (seqBits) and, in its top
// two bits, how many of its ask levels (counter.askAt) the key's window
// passed while it asked for early rounds, since its window was last below
// the re-arm mark (counter.turning).
const (
	seqBits  uint32 = 1<<askShift - 1
	askShift        = 30
	maxAsks         = 3
)

// tally is the writes among some accesses, their bytes and the bytes
// written.
type tally struct{ writes, bytes, writeBytes uint64 }

func (t *tally) add(u *tally) {
	t.writes = satAdd(t.writes, u.writes)
	t.bytes = satAdd(t.bytes, u.bytes)
	t.writeBytes = satAdd(t.writeBytes, u.writeBytes)
}

// extra is a key's writes and bytes: those of its pend accesses and those
// of its fwd accesses. They follow the accesses' decision.
type extra struct{ pend, fwd tally }

// accessQueue holds queued accesses: composite keys back to back, and per
// access the end of its key, its count, its weight and (during drain) its
// hash; xs holds the writes and bytes of the few accesses that have any.
type accessQueue struct {
	keys []byte
	ends []uint32
	ns   []uint64
	ws   []uint64
	hs   []uint64
	xs   []queuedExtra // in queue order
	// The sources of the queued accesses, as runs in queue order: run r
	// starts at access srcs[r].at and lasts until the next one starts;
	// consecutive accesses of one record share their run, whose source
	// is copied and hashed once. A run without a source (b empty) ends a
	// sourced one. No run: no access has a source.
	srcs  []srcRun
	srcOn bool     // the last run has a source
	cand  []uint32 // entries that drain warms
}

type srcRun struct {
	at uint32 // the position of the run's first access in the queue
	srcRef
}

type srcRef struct {
	b []byte // a copy
	h uint64 // xxhash of b
}

type queuedExtra struct {
	at uint32 // the access's position in the queue
	t  tally
}

type touch struct {
	idx uint32 // entries index
	n   uint32 // the bucket's count for the key, set when the bucket closes
}

// newCounter returns a counter whose window spans nBuckets buckets of
// bucketNS nanoseconds, holding at most maxKeys keys and maxBytes key bytes.
func newCounter(bucketNS int64, nBuckets, maxKeys, maxBytes int) *counter {
	maxKeys = max(maxKeys, 1)
	maxBytes = max(maxBytes, 1)
	c := &counter{
		bucketNS:  bucketNS,
		nb:        nBuckets + 1,
		hseed:     maphash.MakeSeed(),
		maxKeys:   maxKeys,
		softKeys:  maxKeys - maxKeys/8,
		maxBytes:  maxBytes,
		softBytes: maxBytes - maxBytes/8,
	}
	c.ring = make([][]touch, c.nb)
	return c
}

// len is the number of keys tracked.
func (c *counter) len() int { return c.live }

// takeStats returns the totals since the previous call and resets them.
func (c *counter) takeStats() counterStats {
	s := c.stats
	c.stats = counterStats{}
	return s
}

// advance moves the counter's clock to now (Unix nanoseconds), closing and
// expiring buckets on the way. A clock that goes back is ignored.
func (c *counter) advance(now int64) {
	c.drain()
	s := now / c.bucketNS
	if !c.started {
		c.started, c.seq = true, s
		return
	}
	if s <= c.seq {
		return
	}
	// After nb rotations every bucket has closed and expired; the remaining
	// ones are empty and only move the clock.
	for n := 0; c.seq < s && n <= c.nb; n++ {
		c.rotate()
	}
	if c.seq < s {
		c.seq = s
	}
}

// rotate closes the open bucket, expires the oldest closed one, and opens
// the next bucket in its place.
func (c *counter) rotate() {
	b := c.ring[c.open]
	for i := range b {
		e := &c.entries[b[i].idx]
		b[i].n = e.cur
		e.cur = 0
		c.decide(b[i].idx, e)
	}
	c.seq++
	c.open++
	if c.open == c.nb {
		c.open = 0
	}
	old := c.ring[c.open]
	rearm := c.windowShare / 5 * 4 // the aggregator's default low mark
	for _, t := range old {
		e := &c.entries[t.idx]
		e.window -= uint64(t.n)
		if e.window < rearm {
			e.seq &= seqBits // it may ask again
		}
		if e.window == 0 && e.fwd == 0 {
			c.remove(t.idx)
		}
	}
	c.ring[c.open] = old[:0]
	if c.sk != nil && c.seq-c.skStart >= int64(c.nb) {
		c.sk.rotate()
		c.skStart = c.seq
	}
}

// decide forwards or drops the key's undecided accesses, and their writes
// and bytes with them.
func (c *counter) decide(idx uint32, e *entry) {
	if e.pend == 0 {
		return
	}
	if e.window >= c.cutoff {
		c.forward(idx, e)
		return
	}
	c.stats.filtered += e.pend
	e.pend = 0
	if e.ext != 0 {
		c.extras[e.ext-1].pend = tally{}
	}
}

func (c *counter) forward(idx uint32, e *entry) {
	if e.fwd == 0 {
		c.fwd = append(c.fwd, idx)
	}
	e.fwd = satAdd(e.fwd, e.pend)
	e.pend = 0
	if e.ext != 0 {
		x := &c.extras[e.ext-1]
		x.fwd.add(&x.pend)
		x.pend = tally{}
	}
}

// add counts n reads without bytes of (app, key) in the open bucket, each
// of weight 1 (tests).
func (c *counter) add(app, key []byte, n uint64) {
	c.kbuf = binary.AppendUvarint(c.kbuf[:0], uint64(len(app)))
	c.kbuf = append(c.kbuf, app...)
	c.kbuf = append(c.kbuf, key...)
	c.addKey(c.kbuf, maphash.Bytes(c.hseed, c.kbuf), n, n)
}

// count queues the decoded entry e, whose app's filter weights are aw.
func (c *counter) count(e *wire.Entry, aw appWeights) {
	if len(e.Src) > 0 || c.q.srcOn {
		c.queueSource(e.Src)
	}
	if e.Op == wire.OpRead && e.Bytes == 0 {
		c.queue(e.App, e.Key, e.Count, satMul(e.Count, aw.access)) // the common case
		return
	}
	t := tally{bytes: e.Bytes}
	if e.Op != wire.OpRead {
		t.writes, t.writeBytes = e.Count, e.Bytes
	}
	c.queueExtra(e.App, e.Key, e.Count, aw.weigh(e.Count, e.Bytes), t)
}

// queueLen is how many queued accesses drain counts at once: enough
// independent cache misses to overlap, few enough that their slots,
// entries and keys stay in the L1 cache until they are counted.
const queueLen = 64

// queue counts n reads without bytes of (app, key), of the given weight,
// deferred until the next drain (at the latest the next advance or flush,
// or when queueLen accesses are waiting): the caller's app and key may be
// reused once queue returns.
func (c *counter) queue(app, key []byte, n, weight uint64) {
	q := &c.q
	q.keys = binary.AppendUvarint(q.keys, uint64(len(app)))
	q.keys = append(q.keys, app...)
	q.keys = append(q.keys, key...)
	q.ends = append(q.ends, uint32(len(q.keys)))
	q.ns = append(q.ns, n)
	q.ws = append(q.ws, weight)
	if weight >= c.bucketHot && c.bucketHot > 0 {
		c.bigQueued = true
	}
	if len(q.ends) == queueLen {
		c.drain()
	}
}

// queueExtra is queue for n accesses of which t says the writes and bytes.
func (c *counter) queueExtra(app, key []byte, n, weight uint64, t tally) {
	c.q.xs = append(c.q.xs, queuedExtra{at: uint32(len(c.q.ends)), t: t})
	c.queue(app, key, n, weight)
}

// drain counts the queued accesses. Looking up one key is a chain of
// dependent cache misses (slot, entry, key bytes, or for a new key in a
// full table its sketch block) that the CPU cannot overlap; so drain first
// walks the queue touching every key's home slot, then every candidate
// entry or sketch block, then every candidate key, each pass's misses
// independent of one another, and only then counts, mostly from cache.
// The touches only warm the cache: counting does its own lookups.
func (c *counter) drain() {
	q := &c.q
	if len(q.ends) == 0 {
		return
	}
	q.hs = q.hs[:0]
	var sink uint64
	start := uint32(0)
	for _, end := range q.ends {
		q.hs = append(q.hs, maphash.Bytes(c.hseed, q.keys[start:end]))
		start = end
	}
	if c.index.slots != nil {
		// A loop of its own, so that its loads fill the CPU's miss
		// buffers rather than wait behind hashing.
		for _, h := range q.hs {
			sink += c.index.slots[uint32(h>>32)&c.index.mask]
		}
		// A key not in its home slot is most likely new, and a new key
		// asks the sketch when the table is past its soft limits.
		sk := c.sk
		if c.live < c.softKeys && c.keyBytes < c.softBytes {
			sk = nil
		}
		q.cand = q.cand[:0]
		for _, h := range q.hs {
			if s := c.index.slots[uint32(h>>32)&c.index.mask]; s != 0 && uint32(s>>32) == uint32(h>>32) {
				e := &c.entries[uint32(s)-1]
				sink += uint64(len(e.key))
				q.cand = append(q.cand, uint32(s)-1)
			} else if sk != nil {
				sink += uint64(sk.block(h)[0])
			}
		}
		for _, idx := range q.cand {
			if k := c.entries[idx].key; k != "" {
				sink += uint64(k[len(k)-1])
			}
		}
	}
	c.sink = sink
	start = 0
	x := 0
	var run *srcRun // the current access's, if it has a source
	nextRun, r := uint32(math.MaxUint32), 0
	if len(q.srcs) > 0 {
		nextRun = q.srcs[0].at
	}
	tracking := len(c.trackers) > len(c.freeSrc)
	for i, end := range q.ends {
		idx, ok := c.addKey(q.keys[start:end], q.hs[i], q.ns[i], q.ws[i])
		if x < len(q.xs) && q.xs[x].at == uint32(i) {
			if ok {
				c.addExtra(idx, &q.xs[x].t)
			}
			x++
		}
		if uint32(i) == nextRun {
			run, r = &q.srcs[r], r+1
			if len(run.b) == 0 {
				run = nil
			}
			nextRun = math.MaxUint32
			if r < len(q.srcs) {
				nextRun = q.srcs[r].at
			}
		}
		switch {
		case !ok:
		case run != nil:
			// Only keys near the threshold have their sources counted:
			// the others cost this test.
			if e := &c.entries[idx]; e.src != 0 || e.window >= c.srcMark {
				c.addSource(idx, &run.srcRef, q.ns[i])
			}
		case tracking:
			// An access without a source counts in its key's total.
			if e := &c.entries[idx]; e.src != 0 {
				t := c.trackers[e.src-1]
				t.unsourced = satAdd(t.unsourced, q.ns[i])
			}
		}
		start = end
	}
	q.keys, q.ends, q.ns, q.ws, q.xs = q.keys[:0], q.ends[:0], q.ns[:0], q.ws[:0], q.xs[:0]
	q.srcs, q.srcOn = q.srcs[:0], false // the copies' buffers are reused
	c.bigQueued = false
}

// drainBig counts the queued accesses now if one of them weighs a bucket's
// worth at the threshold: its key may be turning hot (turning), and the
// owner should know before it waits for the next record.
func (c *counter) drainBig() {
	if c.bigQueued {
		c.drain()
	}
}

// takeEarly reports whether a key turned hot since the last call.
func (c *counter) takeEarly() bool {
	e := c.early
	c.early = false
	return e
}

// setShare sets windowShare and the ask levels that follow from it and
// windowHot: windowShare, their geometric mean and windowHot. A partition
// sees only its share of a key (records are not keyed), anywhere from
// 1/(D × P) of it, where the key's total crosses the threshold as this
// partition's window crosses windowShare, to all of it, where that happens
// at windowHot; the middle level serves the keys in between.
func (c *counter) setShare(share uint64) {
	c.windowShare, c.srcMark = share, share/2
	hot := max(c.windowHot, share)
	mid := uint64(math.Sqrt(float64(share)) * math.Sqrt(float64(hot)))
	c.askAt = [maxAsks + 1]uint64{share, min(max(mid, share), hot), hot, math.MaxUint64}
}

// turning reports whether the access that just added weight added to the
// key of entry e, and took its bucket weight to bucketHot or its window to
// its next ask level, turned it hot on this partition: in the open bucket
// it now weighs as much as Threshold × Bucket accesses (the key arrives
// here, right now, at the threshold rate or faster) and its window has
// reached its next ask level (the first is this partition's share of a hot
// key's window), while before this access the window held less than a
// whole hot key's window (a key this partition alone has seen at the
// threshold rate for a window is hot already). It then records the levels
// the window has passed, so a key asks at most once per level (maxAsks
// times) until its window fell below 4/5 of windowShare (rotate): a key
// hovering between levels does not end a round at every bucket.
//
//go:noinline
func (c *counter) turning(e *entry, added uint64) bool {
	asks := e.seq >> askShift
	if c.bucketHot == 0 || uint64(e.cur) < c.bucketHot || e.window < c.askAt[asks] || e.window-added >= c.windowHot {
		return false
	}
	for asks < maxAsks && e.window >= c.askAt[asks] {
		asks++
	}
	e.seq = e.seq&seqBits | asks<<askShift
	return true
}

// addKey counts n accesses of weight w of the composite key k, whose hash
// is h. It returns the key's entry, or false if the table had no room.
func (c *counter) addKey(k []byte, h, n, w uint64) (uint32, bool) {
	var seed uint64
	idx, ok := c.index.find(c.entries, k, h)
	if !ok {
		if idx, seed, ok = c.insert(k, h, w); !ok {
			c.stats.capDropped++
			return 0, false
		}
	}
	e := &c.entries[idx]
	if e.seq&seqBits != uint32(c.seq)&seqBits {
		e.seq = e.seq&^seqBits | uint32(c.seq)&seqBits
		e.slot = uint32(len(c.ring[c.open]))
		c.ring[c.open] = append(c.ring[c.open], touch{idx: idx})
	}
	cur := e.cur
	e.cur = satAdd32(e.cur, satAdd(w, seed))
	added := uint64(e.cur - cur)
	e.window += added
	e.pend = satAdd(e.pend, n)
	// The key can turn hot only at an access that takes its bucket weight
	// to bucketHot or its window to its next ask level: a busy key's other
	// accesses cost these comparisons and no call. (Comparisons into bools,
	// not && chains: whether a key is busy is not predictable, and a
	// mispredicted branch per access cost 10 %.)
	next := c.askAt[e.seq>>askShift]
	crossB := uint64(e.cur)-added < c.bucketHot != (uint64(e.cur) < c.bucketHot)
	crossW := e.window-added < next != (e.window < next)
	if (crossB || crossW) && c.turning(e, added) {
		c.early = true
	}
	return idx, true
}

// addExtra adds the writes and bytes t to the undecided ones of entry idx,
// giving it extras the first time.
func (c *counter) addExtra(idx uint32, t *tally) {
	e := &c.entries[idx]
	if e.ext == 0 {
		if n := len(c.freeExt); n > 0 {
			e.ext = c.freeExt[n-1] + 1
			c.freeExt = c.freeExt[:n-1]
		} else {
			c.extras = append(c.extras, extra{})
			e.ext = uint32(len(c.extras))
		}
	}
	c.extras[e.ext-1].pend.add(t)
}

// insert makes an entry for a new key. Past the soft limits it asks the
// sketch, which then holds the key's weight while it stays outside; a key
// let in carries the sketch's estimate of its earlier weight as a seed
// (counted in its window, never forwarded). n is the weight of the access
// that brings the key.
func (c *counter) insert(k []byte, h, n uint64) (idx uint32, seed uint64, ok bool) {
	if c.live < c.softKeys && c.keyBytes+len(k) <= c.softBytes {
		return c.newEntry(k, h), 0, true
	}
	if c.sk == nil {
		c.sk = newSketch(c.maxKeys)
		c.skStart = c.seq
	}
	// The estimate must clear the cutoff by the sketch's noise floor, or
	// a flood of distinct keys would fill the reserve with collisions.
	need := satAdd(max(c.cutoff, 1), c.sk.floor())
	est := c.sk.add(h, n)
	if est < need || c.live >= c.maxKeys || c.keyBytes+len(k) > c.maxBytes {
		return 0, 0, false
	}
	c.stats.admitted++
	return c.newEntry(k, h), est - min(est, n), true
}

func (c *counter) newEntry(k []byte, h uint64) uint32 {
	var idx uint32
	if n := len(c.free); n > 0 {
		idx = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		idx = uint32(len(c.entries))
		c.entries = append(c.entries, entry{})
	}
	s := string(k)
	// seq one behind the open bucket: the first add appends a touch.
	c.entries[idx] = entry{key: s, hash: h, seq: (uint32(c.seq) - 1) & seqBits}
	c.index.insert(h, idx, c.entries)
	c.keyBytes += len(s)
	c.live++
	return idx
}

func (c *counter) remove(idx uint32) {
	e := &c.entries[idx]
	if e.ext != 0 {
		c.extras[e.ext-1] = extra{}
		c.freeExt = append(c.freeExt, e.ext-1)
	}
	c.dropSource(e)
	c.index.remove(e.hash, idx)
	c.keyBytes -= len(e.key)
	*e = entry{}
	c.free = append(c.free, idx)
	c.live--
}

// flush appends the accesses decided to be forwarded since the previous
// flush to dst, one Count per key, and returns it. Keys of the open bucket
// whose window count already reaches the cutoff are forwarded now rather than
// when the bucket closes: the window only grows until then, so the decision
// would be the same. With final set, the open bucket's remaining keys are
// decided now too (the counter is being dropped).
func (c *counter) flush(dst []Count, final bool) []Count {
	c.drain()
	for _, t := range c.ring[c.open] {
		e := &c.entries[t.idx]
		if final {
			c.decide(t.idx, e)
		} else if e.pend > 0 && e.window >= c.cutoff {
			c.forward(t.idx, e)
		}
	}
	for _, idx := range c.fwd {
		e := &c.entries[idx]
		app, key := splitKey(e.key)
		ct := Count{App: app, Key: key, N: e.fwd}
		if e.ext != 0 {
			x := &c.extras[e.ext-1]
			ct.Writes, ct.Bytes, ct.WriteBytes = x.fwd.writes, x.fwd.bytes, x.fwd.writeBytes
			x.fwd = tally{}
		}
		dst = append(dst, ct)
		e.fwd = 0
		if e.window == 0 {
			c.remove(idx)
		}
	}
	c.fwd = c.fwd[:0]
	return dst
}

// splitKey splits a composite key into app and key without copying.
func splitKey(s string) (app, key string) {
	var n, shift uint
	i := 0
	for ; i < len(s); i++ {
		b := s[i]
		n |= uint(b&0x7f) << shift
		if b < 0x80 {
			i++
			break
		}
		shift += 7
	}
	return s[i : i+int(n)], s[i+int(n):]
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// satMul returns a*b, or 2^64-1 if it overflows.
func satMul(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}

func satAdd32(a uint32, b uint64) uint32 {
	if s := uint64(a) + b; s >= b && s <= math.MaxUint32 {
		return uint32(s)
	}
	return math.MaxUint32
}
