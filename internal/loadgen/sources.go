package loadgen

import (
	"math"
	"strconv"
	"strings"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Sources (Config.Sources): the generator plays N app instances, and every
// access it sends names the one that made it, as the SDK's reporter of each
// instance does (its source, wire.Entry.Src). An access is attributed to an
// instance drawn with a generator of its own (so that a run's keys are the
// same with and without sources), uniformly or, with SourceSkew s, with
// P(instance i) ∝ (i+1)^-s. A Flash with a TopSource gives that instance a
// fixed share of the key's events, exactly (floor(TopShare*n) of its first
// n), the others drawn over the other instances: a redraw while the top
// one comes out, and after 64 draws of it in a row (only an extreme skew
// gets there) a uniform draw over the others.
//
// The records carry the source as each form can: FormBinary writes one
// version 3 access batch (wire.AppendAccessesFrom) per app and instance per
// flush; FormJSON and FormNDJSON add "src"; FormCombined puts the instance's
// address in remote_addr and FormMappedJSON in client.ip, which their input
// files map (source_field). The Truth counts the planted keys' events per
// source over the run (TruthKey.Sources), for comparing with what hotspotd
// reports of a hot key's sources.

// MaxSources is the most instances Config.Sources may give.
const MaxSources = 1 << 16

// SourceName returns the name of instance i (0-based) as the records of
// form f carry it: "inst-<i>" in hotspot's own forms (binary, json,
// ndjson), and in the access-log forms (combined, mapped-json), whose
// sources are clients, the address 10.x.y.z that is i+1 in its last three
// bytes (instance 0 is 10.0.0.1, instance 255 is 10.0.1.0).
func SourceName(f Form, i int) string {
	if f == FormCombined || f == FormMappedJSON {
		n := i + 1
		return "10." + strconv.Itoa(n>>16&255) + "." + strconv.Itoa(n>>8&255) + "." + strconv.Itoa(n&255)
	}
	return "inst-" + strconv.Itoa(i)
}

// sourceIndex returns the instance that name names among n in form f:
// "inst-<i>" in any form, or SourceName(f, i); -1 if none.
func sourceIndex(f Form, n int, name string) int {
	if digits, ok := strings.CutPrefix(name, "inst-"); ok {
		if i, err := strconv.Atoi(digits); err == nil && i >= 0 && i < n && strconv.Itoa(i) == digits {
			return i
		}
		return -1
	}
	if f != FormCombined && f != FormMappedJSON {
		return -1
	}
	parts := strings.Split(name, ".")
	if len(parts) != 4 || parts[0] != "10" {
		return -1
	}
	v := 0
	for _, p := range parts[1:] {
		b, err := strconv.Atoi(p)
		if err != nil || b < 0 || b > 255 {
			return -1
		}
		v = v<<8 | b
	}
	if i := v - 1; i >= 0 && i < n && SourceName(f, i) == name {
		return i
	}
	return -1
}

// sourceNames returns the names of c's instances, nil without sources.
func (c Config) sourceNames() []string {
	if c.Sources == 0 {
		return nil
	}
	names := make([]string, c.Sources)
	for i := range names {
		names[i] = SourceName(c.Form, i)
	}
	return names
}

// drawSource returns the instance of an access.
func (g *generator) drawSource() int {
	if g.szipf != nil {
		return int(g.szipf.sample(g.srng)) - 1
	}
	return g.srng.IntN(g.nsrc)
}

// drawOther returns the instance of an access that top does not make.
func (g *generator) drawOther(top int) int {
	for range 64 {
		if s := g.drawSource(); s != top {
			return s
		}
	}
	s := g.srng.IntN(g.nsrc - 1)
	if s >= top {
		s++
	}
	return s
}

// backgroundSources generates q background events of a run with sources
// (step does those of a run without).
func (g *generator) backgroundSources(q uint64, slot int, ts int64) {
	keys := g.truth.Keys
	for range q {
		r := g.zipf.sample(g.rng)
		s := g.drawSource()
		k := -1
		if r <= g.tracked {
			k = int(r - 1)
		} else if g.extra != nil {
			if i, ok := g.extra[r]; ok {
				k = i
			}
		}
		if k >= 0 {
			keys[k].Counts[slot]++
			if c := keys[k].Sources; c != nil {
				c[s]++
			}
		}
		a := int((r - 1) % uint64(g.c.Apps))
		if g.agg == nil {
			g.event(g.apps[a], g.key(r), ts, g.srcs[s])
			continue
		}
		m := g.agg[a*g.nsrc+s]
		if m == nil {
			m = make(map[uint32]uint64)
			g.agg[a*g.nsrc+s] = m
		}
		m[uint32(r)]++
	}
}

// plantSources generates the q events planted key p sends in a tick of a
// run with sources, n0 and n1 being its cumulative counts before and after
// the tick (whole numbers).
func (g *generator) plantSources(p *plant, q uint64, n0, n1 float64, ts int64) {
	var top uint64 // of the q events, those of the top source
	if p.top >= 0 {
		top = uint64(math.Floor(p.f.TopShare*n1) - math.Floor(p.f.TopShare*n0))
	}
	counts := g.truth.Keys[p.truth].Sources
	binary := g.c.Form == FormBinary
	if binary {
		p.pending += q
	}
	for k := range q {
		s := p.top
		switch {
		case k < top:
		case p.top >= 0:
			s = g.drawOther(p.top)
		default:
			s = g.drawSource()
		}
		counts[s]++
		if binary {
			p.bySrc[s]++
		} else {
			g.event(g.apps[p.app], p.f.Key, ts, g.srcs[s])
		}
	}
}

// flushSources emits app a's version 3 batches of the flush interval, one
// or more per instance that made accesses, at most BatchEntries entries
// each, and clears its counts.
func (g *generator) flushSources(a int, app string) {
	for s, src := range g.srcs {
		all := g.acc[:0]
		if i := a*g.nsrc + s; i < len(g.agg) && g.agg[i] != nil {
			for r, n := range g.agg[i] {
				all = append(all, wire.Access{Key: g.key(uint64(r)), Count: n})
			}
			clear(g.agg[i])
		}
		for j := range g.plants {
			if p := &g.plants[j]; p.app == a && p.bySrc[s] > 0 {
				all = append(all, wire.Access{Key: p.f.Key, Count: p.bySrc[s]})
				p.bySrc[s] = 0
			}
		}
		g.emitAccesses(app, src, all, false)
		g.acc = all[:0]
	}
	for j := range g.plants {
		if p := &g.plants[j]; p.app == a {
			p.pending, p.early = 0, false
		}
	}
}

// emitAccesses emits entries as version 3 batches from src, at most
// BatchEntries entries each; early marks them as early sends.
func (g *generator) emitAccesses(app, src string, entries []wire.Access, early bool) {
	for len(entries) > 0 {
		chunk := entries[:min(len(entries), g.c.BatchEntries)]
		entries = entries[len(chunk):]
		var events int64
		for _, e := range chunk {
			events += int64(e.Count)
		}
		from := len(g.slab)
		if g.c.HideSources {
			src = "" // version 2: the baseline of what a source costs
		}
		g.slab = wire.AppendAccessesFrom(g.slab, app, src, g.aggStart, chunk)
		g.stats.Entries += int64(len(chunk))
		if early {
			g.stats.EarlyRecords++
		}
		g.emit(from, events, 0)
	}
}

// sendEarlySources is sendEarly for a run with sources: the planted keys
// of app a that are due go in one record per instance that made accesses
// of them.
func (g *generator) sendEarlySources(a int, app string, slot int) {
	due := g.due[:0]
	for j := range g.plants {
		p := &g.plants[j]
		if p.app == a && !p.early && p.pending >= g.c.EarlyCount && !g.hotInTruth(p.truth, slot) {
			due = append(due, j)
		}
	}
	g.due = due[:0]
	if len(due) == 0 {
		return
	}
	for s, src := range g.srcs {
		acc := g.acc[:0]
		for _, j := range due {
			if p := &g.plants[j]; p.bySrc[s] > 0 {
				acc = append(acc, wire.Access{Key: p.f.Key, Count: p.bySrc[s]})
				p.bySrc[s] = 0
			}
		}
		g.emitAccesses(app, src, acc, true)
		g.acc = acc[:0]
	}
	for _, j := range due {
		g.plants[j].pending, g.plants[j].early = 0, true
	}
}
