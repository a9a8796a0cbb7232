package loadgen

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// keyCacheSize bounds the cache of background key strings (the head ranks,
// which draw most events, are then formatted once).
const keyCacheSize = 1 << 16

// generator turns tick numbers into records. It does no I/O and reads no
// clock: tick i covers [i*Tick, (i+1)*Tick) from the start, so the same
// Config and seed give the same events, and tests can drive it directly.
// It is owned by one goroutine.
type generator struct {
	c       Config
	apps    []string // background apps first, then apps that only planted keys use
	rng     *rand.Rand
	zipf    *zipf // nil without background
	tickMs  int64
	perSlot int64 // ticks per truth slot
	perFlsh int64 // ticks per binary flush
	startMs int64

	truth   *Truth
	tracked uint64         // background ranks 1..tracked are truth.Keys[0..tracked-1]
	extra   map[uint64]int // other background ranks a planted key shares a name with -> truth index
	plants  []plant
	keys    []string // cached key strings by rank

	agg      []map[uint32]uint64 // FormBinary: per background app and instance (app*nsrc + instance), rank -> count since the last flush
	aggStart int64               // FormBinary: Unix ms at which the current flush interval began
	kcs      []wire.KeyCount     // scratch
	acc      []wire.Access       // scratch (sources)
	due      []int               // scratch (sources)

	// Sources (sources.go); srcs is nil without them.
	srcs  []string   // instance -> its name in the records
	nsrc  int        // instances, at least 1
	srng  *rand.Rand // draws instances
	szipf *zipf      // SourceSkew > 0: draws instance+1

	slab     []byte // values of the current step's records
	slabHint int
	recs     []Record
	open     int   // line forms: offset in slab of the record being filled
	lines    int   // line forms: lines in it
	events   int64 // line forms: events in it
	tickTS   int64 // the current tick's start, Unix ms: the time of its accesses
	ticks    int64 // ticks generated

	clfSec int64  // FormCombined: the second that clf formats
	clf    []byte // FormCombined: time_local of clfSec

	stats Stats // totals of what was produced
}

type plant struct {
	f       Flash
	app     int      // index in generator.apps
	truth   int      // index in Truth.Keys
	pending uint64   // FormBinary: count since the last flush
	early   bool     // FormBinary: sent early in the current flush interval
	top     int      // the instance of f.TopSource; -1: none
	bySrc   []uint64 // FormBinary with sources: pending per instance
}

// newGenerator builds the generator for a resolved Config, with slot 0
// starting at startMs.
func newGenerator(c Config, startMs int64) (*generator, error) {
	g := &generator{
		c:        c,
		apps:     c.appNames(),
		rng:      rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15)),
		tickMs:   c.Tick.Milliseconds(),
		perSlot:  int64(SlotDuration / c.Tick),
		perFlsh:  int64(c.Flush / c.Tick),
		startMs:  startMs,
		aggStart: startMs,
		srcs:     c.sourceNames(),
		nsrc:     max(c.Sources, 1),
		keys:     make([]string, min(c.Keys+1, keyCacheSize)),
	}
	if err := g.drawSources(); err != nil {
		return nil, err
	}
	g.truth = g.newTruth()
	index := make(map[AppKey]int) // truth.Keys by name
	if c.Rate > 0 {
		if err := g.background(index); err != nil {
			return nil, err
		}
	}
	for _, f := range c.Flashes {
		g.plant(f, index)
	}
	return g, nil
}

// drawSources sets up the draw of each access's instance, with sources.
func (g *generator) drawSources() error {
	c := g.c
	if c.Sources == 0 {
		return nil
	}
	g.srng = rand.New(rand.NewPCG(c.Seed^0x5bd1e9955bd1e995, c.Seed+0x2545f4914f6cdd1d))
	if c.SourceSkew > 0 {
		z, err := newZipf(uint64(c.Sources), c.SourceSkew)
		if err != nil {
			return err
		}
		g.szipf = z
	}
	return nil
}

// newTruth returns the run's Truth, with its workload and no key yet.
func (g *generator) newTruth() *Truth {
	c := g.c
	return &Truth{
		Version:   TruthVersion,
		StartMs:   g.startMs,
		SlotMs:    SlotDuration.Milliseconds(),
		Threshold: c.Threshold,
		Workload: Workload{
			Rate: c.Rate, Keys: c.Keys, Skew: c.Skew, KeyPrefix: c.KeyPrefix,
			Apps: g.apps, Form: c.Form.String(), TickMs: g.tickMs,
			FlushMs: c.Flush.Milliseconds(), Seed: c.Seed,
			Sources: c.Sources, SourceSkew: c.SourceSkew,
		},
	}
}

// background sets up the Zipf background: its draw, the truth of the ranks
// expected at TrackFraction of the threshold or more (added to index), and
// FormBinary's per app and instance counts.
func (g *generator) background(index map[AppKey]int) error {
	c := g.c
	z, err := newZipf(c.Keys, c.Skew)
	if err != nil {
		return err
	}
	g.zipf = z
	for r := uint64(1); r <= c.Keys && r <= maxTracked; r++ {
		exp := c.Rate * z.prob(r)
		if exp < TrackFraction*c.Threshold {
			break // prob decreases with the rank
		}
		ak := AppKey{g.appOf(r), g.key(r)}
		index[ak] = len(g.truth.Keys)
		g.truth.Keys = append(g.truth.Keys, TruthKey{App: ak.App, Key: ak.Key, Rank: r, Expected: exp})
		g.tracked = r
	}
	if c.Form == FormBinary {
		g.agg = make([]map[uint32]uint64, len(g.apps)*g.nsrc)
		for i := range g.agg {
			if g.srcs == nil { // with sources, made when first used
				g.agg[i] = make(map[uint32]uint64)
			}
		}
	}
	return nil
}

// plant adds the planted key of f: its truth (shared with a background key
// of its name; index finds it) and its line in the truth's workload.
func (g *generator) plant(f Flash, index map[AppKey]int) {
	c := g.c
	p := plant{f: f, app: g.appIndex(f.App), top: -1}
	ak := AppKey{g.apps[p.app], f.Key}
	i, ok := index[ak]
	if !ok {
		i = len(g.truth.Keys)
		index[ak] = i
		g.truth.Keys = append(g.truth.Keys, TruthKey{App: ak.App, Key: ak.Key})
		// A planted key named like an untracked background key: count
		// the background's events for it too, or its truth would be short.
		if r := g.rankOf(ak); r > g.tracked {
			if g.extra == nil {
				g.extra = make(map[uint64]int)
			}
			g.extra[r] = i
			g.truth.Keys[i].Rank = r
			g.truth.Keys[i].Expected = c.Rate * g.zipf.prob(r)
		}
	}
	g.truth.Keys[i].Planted = true
	g.truth.Keys[i].Expected += f.Rate
	p.truth = i
	if g.srcs != nil {
		if g.truth.Keys[i].Sources == nil {
			g.truth.Keys[i].Sources = make([]uint64, g.nsrc)
		}
		if f.TopSource != "" {
			p.top = sourceIndex(c.Form, c.Sources, f.TopSource)
		}
		if c.Form == FormBinary {
			p.bySrc = make([]uint64, g.nsrc)
		}
	}
	g.plants = append(g.plants, p)
	wf := Flash{App: ak.App, Key: f.Key, Start: f.Start, Ramp: f.Ramp, End: f.End, Rate: f.Rate}
	if p.top >= 0 {
		wf.TopSource, wf.TopShare = g.srcs[p.top], f.TopShare
	}
	g.truth.Workload.Flashes = append(g.truth.Workload.Flashes, wf.String())
}

// appIndex returns the index of app in g.apps, adding it if it is new; ""
// is the first app.
func (g *generator) appIndex(app string) int {
	if app == "" {
		return 0
	}
	for i, a := range g.apps {
		if a == app {
			return i
		}
	}
	g.apps = append(g.apps, app)
	if g.agg != nil {
		for range g.nsrc {
			g.agg = append(g.agg, nil) // no background in this app
		}
	}
	return len(g.apps) - 1
}

// appOf returns the app of background rank r.
func (g *generator) appOf(r uint64) string { return g.apps[(r-1)%uint64(g.c.Apps)] }

// rankOf returns the background rank named ak, or 0.
func (g *generator) rankOf(ak AppKey) uint64 {
	if g.zipf == nil {
		return 0
	}
	digits, ok := strings.CutPrefix(ak.Key, g.c.KeyPrefix)
	if !ok {
		return 0
	}
	r, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || r < 1 || r > g.c.Keys || strconv.FormatUint(r, 10) != digits || g.appOf(r) != ak.App {
		return 0
	}
	return r
}

// key returns the name of background rank r.
func (g *generator) key(r uint64) string {
	if r < uint64(len(g.keys)) {
		if k := g.keys[r]; k != "" {
			return k
		}
		k := g.c.KeyPrefix + strconv.FormatUint(r, 10)
		g.keys[r] = k
		return k
	}
	return g.c.KeyPrefix + strconv.FormatUint(r, 10)
}

// backgroundBy returns how many background events the run has produced by
// offset d: floor(Rate * d), so every tick's quota carries the fraction the
// earlier ticks left over.
func (g *generator) backgroundBy(d time.Duration) uint64 {
	return uint64(math.Floor(g.c.Rate * float64(d) / 1e9))
}

// late notes that tick i started after its deadline (the generator had
// fallen behind) and was handed to the Sink at at: when it is a slot's last
// tick, the Truth lists the slot as late (Truth.LateMs), so that no crossing
// is dated before its events existed.
func (g *generator) late(i int64, at time.Time) {
	if (i+1)%g.perSlot != 0 {
		return
	}
	if g.truth.LateMs == nil {
		g.truth.LateMs = make(map[int]int64)
	}
	g.truth.LateMs[int(i/g.perSlot)] = at.UnixMilli()
}

// step generates tick i (ticks must come in order, from 0) and returns its
// records. They stay valid until the Sink is done with them: the generator
// never writes to them again.
func (g *generator) step(i int64) []Record {
	g.begin()
	slot := int(i / g.perSlot)
	g.truth.grow(slot + 1)
	ts := g.startMs + i*g.tickMs
	g.tickTS = ts
	d0, d1 := time.Duration(i)*g.c.Tick, time.Duration(i+1)*g.c.Tick

	if g.zipf != nil && g.srcs != nil {
		g.backgroundSources(g.backgroundBy(d1)-g.backgroundBy(d0), slot, ts)
	} else if g.zipf != nil {
		q := g.backgroundBy(d1) - g.backgroundBy(d0)
		keys := g.truth.Keys
		for range q {
			r := g.zipf.sample(g.rng)
			if r <= g.tracked {
				keys[r-1].Counts[slot]++
			} else if g.extra != nil {
				if k, ok := g.extra[r]; ok {
					keys[k].Counts[slot]++
				}
			}
			a := (r - 1) % uint64(g.c.Apps)
			if g.agg != nil {
				g.agg[a][uint32(r)]++
			} else {
				g.event(g.apps[a], g.key(r), ts, "")
			}
		}
	}
	for j := range g.plants {
		p := &g.plants[j]
		n0, n1 := math.Floor(p.f.cumulative(d0)), math.Floor(p.f.cumulative(d1))
		q := uint64(n1 - n0)
		if q == 0 {
			continue
		}
		g.truth.Keys[p.truth].Counts[slot] += q
		if g.srcs != nil {
			g.plantSources(p, q, n0, n1, ts)
			continue
		}
		if g.c.Form == FormBinary {
			p.pending += q
			continue
		}
		for range q {
			g.event(g.apps[p.app], p.f.Key, ts, "")
		}
	}
	g.ticks = i + 1
	if g.c.Form.lines() {
		g.closeLines()
	}
	if g.c.Form == FormBinary && g.ticks%g.perFlsh == 0 {
		g.flushBatches(g.startMs + g.ticks*g.tickMs)
	} else {
		g.sendEarly(i)
	}
	return g.end()
}

// finish returns the records still held back (a partial binary flush
// interval) at the end of a run.
func (g *generator) finish() []Record {
	g.begin()
	if g.c.Form == FormBinary {
		g.flushBatches(g.startMs + g.ticks*g.tickMs)
	}
	return g.end()
}

func (g *generator) begin() {
	g.recs = g.recs[:0]
	g.slab = make([]byte, 0, max(g.slabHint, 4096))
}

func (g *generator) end() []Record {
	g.slabHint = len(g.slab) + len(g.slab)/4
	return g.recs
}

// emit makes slab[from:] a record carrying events, with the Kafka
// timestamp timeMs (0: the writer's clock).
func (g *generator) emit(from int, events, timeMs int64) {
	v := g.slab[from:len(g.slab):len(g.slab)] // capped: appending to slab never writes into it
	g.recs = append(g.recs, Record{Value: v, Events: events, TimeMs: timeMs})
	g.stats.Records++
	g.stats.Bytes += int64(len(v))
	g.stats.Events += events
}

// event writes one access made by src ("": none), as its own record
// (FormJSON) or as a line of the record being filled (the line forms:
// FormNDJSON, FormCombined and FormMappedJSON).
func (g *generator) event(app, key string, ts int64, src string) {
	g.stats.Entries++
	if g.c.Form == FormJSON {
		from := len(g.slab)
		g.slab = wire.AppendJSON(g.slab, wire.Event{App: app, Key: key, TS: ts, Src: src})
		g.emit(from, 1, 0)
		return
	}
	if g.lines > 0 {
		g.slab = append(g.slab, '\n')
	} else {
		g.open = len(g.slab)
	}
	switch g.c.Form {
	case FormCombined:
		g.slab = g.appendCombined(g.slab, app, key, ts, src)
	case FormMappedJSON:
		g.slab = appendMappedJSON(g.slab, app, key, ts, src)
	default:
		g.slab = wire.AppendJSON(g.slab, wire.Event{App: app, Key: key, TS: ts, Src: src})
	}
	g.lines++
	g.events++
	if g.lines == g.c.Lines {
		g.closeLines()
	}
}

// closeLines emits the record of a line form being filled, if any. Each
// tick ends with it, so no event waits for a later tick to be sent, and
// all lines of a record are of one tick. The records of FormCombined and
// FormMappedJSON carry that tick's start as their Kafka timestamp, as a log
// shipper stamps a line with the time it read it: combined's input reads
// the access's time from it.
func (g *generator) closeLines() {
	if g.lines == 0 {
		return
	}
	var timeMs int64
	if g.c.Form == FormCombined || g.c.Form == FormMappedJSON {
		timeMs = g.tickTS
	}
	g.emit(g.open, g.events, timeMs)
	g.lines, g.events = 0, 0
}

// flushBatches emits the binary batches of the interval that began at
// g.aggStart, per app (and instance, with sources), at most BatchEntries
// entries each, and starts the next interval at next.
func (g *generator) flushBatches(next int64) {
	for a, app := range g.apps {
		if g.srcs != nil {
			g.flushSources(a, app)
			continue
		}
		all := g.kcs[:0]
		if a < len(g.agg) && g.agg[a] != nil {
			for r, n := range g.agg[a] {
				all = append(all, wire.KeyCount{Key: g.key(uint64(r)), Count: n})
			}
			clear(g.agg[a])
		}
		for j := range g.plants {
			if p := &g.plants[j]; p.app == a && p.pending > 0 {
				all = append(all, wire.KeyCount{Key: p.f.Key, Count: p.pending})
				p.pending = 0
			}
			if p := &g.plants[j]; p.app == a {
				p.early = false
			}
		}
		for kcs := all; len(kcs) > 0; {
			chunk := kcs[:min(len(kcs), g.c.BatchEntries)]
			kcs = kcs[len(chunk):]
			var events int64
			for _, e := range chunk {
				events += int64(e.Count)
			}
			from := len(g.slab)
			g.slab = wire.AppendBatch(g.slab, app, g.aggStart, chunk)
			g.stats.Entries += int64(len(chunk))
			g.emit(from, events, 0)
		}
		g.kcs = all[:0]
	}
	g.aggStart = next
}
