package detector

import (
	"bytes"
	"maps"
	"math"
	"math/bits"

	"github.com/hotspot-dev/hotspot/rules"
)

// unit is the filter weight of one access under the detector's own rule
// (Config.Threshold over Config.Window). The cutoff is in the same units:
// ceil(unit × Alpha × Threshold × Window / (D × P)), at most 2^32-1.
const unit = 256

// appWeights are the filter weights of one app's accesses. The filter keeps
// one cutoff for every app and weighs each access instead, so that the loss
// bound Alpha × Threshold of the detector's own rule holds, per rule, for
// an app whose rules count fewer accesses, or count bytes: an access weighs
// unit × (the detector's threshold over the rule's, over the detector's
// window) for the app's most demanding count rule, and a byte as much for
// its most demanding bytes rule (docs/detector.md, "Rules").
type appWeights struct {
	access  uint64 // weight of one access: unit, more for stricter rules, top for topk
	perByte uint64 // weight of one byte, in units of 2^-32; 0: bytes weigh nothing
	// top is the largest cutoff (one detector, one partition): an access
	// never weighs more, bytes included, since more would change no
	// decision and would only swell the sketch's noise floor. 0: no app
	// rules (bytes weigh nothing).
	top uint64
}

// defaultWeights are those of an app without rules (or whose rules are no
// stricter than the detector's own).
var defaultWeights = appWeights{access: unit}

// weigh returns the weight of an access of n accesses that moved b bytes.
func (w appWeights) weigh(n, b uint64) uint64 {
	a := satMul(n, w.access)
	if w.perByte == 0 || b == 0 {
		return a
	}
	return max(a, min(satAdd(a, w.bytesWeight(b)), w.top))
}

// bytesWeight is the weight of b bytes, rounded up and saturated.
func (w appWeights) bytesWeight(b uint64) uint64 {
	if w.perByte == 0 || b == 0 {
		return 0
	}
	hi, lo := bits.Mul64(b, w.perByte)
	if hi >= 1<<32 {
		return math.MaxUint64
	}
	v := hi<<32 | lo>>32
	if lo<<32 != 0 {
		v++
	}
	return v
}

// weightsFor returns the weights of an app whose rules are s. A rule with
// threshold T per second over window Wr tolerates a loss of Alpha × T × Wr
// in any interval of its window; the filter loses less than its cutoff per
// interval of the detector's Window W, so over Wr it loses up to
// ceil(Wr/W) cutoffs. The rule's share of the detector's threshold is
// therefore (T × Wr / ceil(Wr/W)) / (Threshold × W), and its accesses (or
// bytes) must weigh the inverse, in units. The result never weighs an
// access less than unit: the detector's own rule still holds for every app.
func (cfg Config) weightsFor(s *rules.Set) appWeights {
	base := cfg.Threshold * cfg.Window.Seconds() // accesses over W at the detector's threshold
	access, perByte := 1.0, 0.0
	consider := func(e rules.Effective) bool {
		switch e.Mode {
		case rules.Never:
			return true // never hot: the detector's own rule bounds its loss
		case rules.TopK:
			return false // the K-th busiest key's rate has no floor
		}
		pieces := math.Ceil(float64(e.Window) / float64(cfg.Window))
		share := e.Threshold * e.Window.Seconds() / max(pieces, 1) / base
		if e.Measure == rules.Bytes {
			perByte = max(perByte, 1/share)
		} else {
			access = max(access, 1/share)
		}
		return true
	}
	top := max(cfg.cutoff(1, 1), unit)
	all := appWeights{access: top, top: top} // one access reaches any cutoff
	if !consider(s.Default()) {
		return all
	}
	for i := range s.Len() {
		if !consider(s.Rule(i)) {
			return all
		}
	}
	w := appWeights{access: top, top: top}
	if a := math.Ceil(unit * access); a < float64(top) {
		w.access = uint64(a)
	}
	if perByte > 0 {
		w.perByte = math.MaxUint64
		if b := math.Ceil(unit * perByte * (1 << 32)); b < math.MaxUint64 {
			w.perByte = max(uint64(b), 1)
		}
	}
	if w.access == unit && w.perByte == 0 {
		return defaultWeights // no rule asks for more than the default
	}
	return w
}

// weightTable is the weights of the apps that have rules: immutable once
// published; SetRules publishes a new one.
type weightTable struct {
	apps map[string]appWeights
}

// SetRules makes the filter forward what the rules s of app need (nil:
// the app has no rules; the detector's own Threshold and Window apply).
// It may be called at any time from any goroutine; the workers use the new
// weights from their next record on, and the filter's loss bound for the
// new rules holds once the accesses weighed by the old ones have left the
// window (Window+Bucket). See docs/detector.md, "Rules".
func (d *Detector) SetRules(app string, s *rules.Set) {
	d.rulesMu.Lock()
	defer d.rulesMu.Unlock()
	w := defaultWeights
	if s != nil {
		w = d.cfg.weightsFor(s)
	}
	apps := make(map[string]appWeights)
	if old := d.weights.Load(); old != nil {
		maps.Copy(apps, old.apps)
	}
	if w == defaultWeights {
		delete(apps, app)
	} else {
		apps[app] = w
	}
	if len(apps) == 0 {
		d.weights.Store(nil)
		return
	}
	d.weights.Store(&weightTable{apps: apps})
}

// weigher finds the weights of each entry's app for one worker, caching
// the last app: the entries of a binary batch, and the lines of most JSON
// records, share one.
type weigher struct {
	t      *weightTable
	last   []byte // copy of the last app looked up
	lastW  appWeights
	cached bool
}

// reset uses table t (nil: no app has rules) from now on.
func (g *weigher) reset(t *weightTable) {
	if t != g.t {
		g.t, g.cached = t, false
	}
}

// of returns the weights of app.
func (g *weigher) of(app []byte) appWeights {
	if g.t == nil {
		return defaultWeights
	}
	if g.cached && bytes.Equal(app, g.last) {
		return g.lastW
	}
	w, ok := g.t.apps[string(app)]
	if !ok {
		w = defaultWeights
	}
	g.last = append(g.last[:0], app...)
	g.lastW, g.cached = w, true
	return w
}
