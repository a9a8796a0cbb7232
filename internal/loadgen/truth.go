package loadgen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// TruthVersion is the version of the Truth file format this package writes
// and reads.
const TruthVersion = 1

// Truth is the ground truth of a run: for every key that could matter, the
// exact number of events the generator handed to its Sink in each 100 ms slot.
// Slot i covers [StartMs + i*SlotMs, StartMs + (i+1)*SlotMs); an event is
// counted in the slot of the tick that produced it, which is also the time
// its record carries (the JSON "ts", or the binary batch's start time).
//
// It holds every planted key and every background key whose expected rate is
// at least TrackFraction * Threshold. A key it does not hold had an expected
// rate below that: with the default 0.3 of the threshold, reaching 0.8 of the
// threshold in a window of a second would take a deviation of many standard
// deviations, so a scorer may treat such a key as never hot.
//
// The counts are what was handed to the Sink; if Stats.FailedEvents is not 0,
// some of them never reached Kafka and the run should not be scored.
type Truth struct {
	Version   int        `json:"version"`   // TruthVersion
	StartMs   int64      `json:"start_ms"`  // start of slot 0, Unix milliseconds
	SlotMs    int64      `json:"slot_ms"`   // slot length, milliseconds (100)
	Slots     int        `json:"slots"`     // number of slots; every Counts has this length
	Threshold float64    `json:"threshold"` // Config.Threshold, events/s
	Workload  Workload   `json:"workload"`
	Keys      []TruthKey `json:"keys"`
	// LateMs lists the slots whose last events the generator handed over
	// after the slot's end, because it had fallen behind its schedule:
	// slot index -> when it handed them over, Unix milliseconds. Slots
	// handed over on time are not listed.
	LateMs map[int]int64 `json:"late_ms,omitempty"`
}

// Workload records the configuration a Truth came from.
type Workload struct {
	Rate      float64  `json:"rate"` // background events/s
	Keys      uint64   `json:"keys"`
	Skew      float64  `json:"skew"`
	KeyPrefix string   `json:"key_prefix"`
	Apps      []string `json:"apps"`
	Flashes   []string `json:"flashes,omitempty"` // in ParseFlash syntax
	Form      string   `json:"form"`
	TickMs    int64    `json:"tick_ms"`
	FlushMs   int64    `json:"flush_ms"`
	Seed      uint64   `json:"seed"`
	// Sources is Config.Sources: how many instances the accesses came
	// from (0: none); instance i is named SourceName(Form, i).
	Sources    int     `json:"sources,omitempty"`
	SourceSkew float64 `json:"source_skew,omitempty"` // Config.SourceSkew; 0: uniform
}

// TruthKey is one key's send log.
type TruthKey struct {
	App      string   `json:"app"`
	Key      string   `json:"key"`
	Rank     uint64   `json:"rank,omitempty"`    // Zipf rank when it is a background key
	Planted  bool     `json:"planted,omitempty"` // true when a Flash sends it
	Expected float64  `json:"expected_rate"`     // background expectation plus planted target rates, events/s
	Counts   []uint64 `json:"counts"`            // events sent per slot
	// Sources, in a run with sources and for planted keys only, holds the
	// key's events per instance over the run (index i: the instance named
	// SourceName(Form, i)), background events of the key included.
	Sources []uint64 `json:"sources,omitempty"`
}

// AppKey names a key within an app.
type AppKey struct{ App, Key string }

// Start returns the start of slot 0.
func (t *Truth) Start() time.Time { return time.UnixMilli(t.StartMs) }

// slots returns the window as a whole number of slots, at least 1.
func (t *Truth) slots(window time.Duration) int {
	slot := time.Duration(t.SlotMs) * time.Millisecond
	return max(1, int((window+slot/2)/slot))
}

// Crossings returns, for each key whose true rate over a trailing window
// reached threshold (events/s), the first time it did: the end of the first
// slot i at which the events of slots i-w+1..i add up to at least
// threshold * w * slot, w being window rounded to whole slots (at least 1),
// with slots before the start counting as empty. No event of those slots was
// sent later than that time, so it is the earliest moment a detector could
// have seen the crossing, give or take one pacing tick. Keys that never reached
// threshold are absent.
func (t *Truth) Crossings(threshold float64, window time.Duration) map[AppKey]time.Time {
	w := t.slots(window)
	need := threshold * float64(w) * float64(t.SlotMs) / 1000
	out := make(map[AppKey]time.Time)
	for _, k := range t.Keys {
		var sum uint64
		for i, n := range k.Counts {
			sum += n
			if i >= w {
				sum -= k.Counts[i-w]
			}
			if float64(sum) >= need {
				at := t.StartMs + int64(i+1)*t.SlotMs
				if late, ok := t.LateMs[i]; ok {
					at = max(at, late) // the events did not exist before
				}
				out[AppKey{k.App, k.Key}] = time.UnixMilli(at)
				break
			}
		}
	}
	return out
}

// MaxRate returns every key's highest true rate, in events/s, over any
// trailing window (rounded to whole slots as in Crossings).
func (t *Truth) MaxRate(window time.Duration) map[AppKey]float64 {
	w := t.slots(window)
	secs := float64(w) * float64(t.SlotMs) / 1000
	out := make(map[AppKey]float64, len(t.Keys))
	for _, k := range t.Keys {
		var sum, best uint64
		for i, n := range k.Counts {
			sum += n
			if i >= w {
				sum -= k.Counts[i-w]
			}
			best = max(best, sum)
		}
		out[AppKey{k.App, k.Key}] = float64(best) / secs
	}
	return out
}

// Totals returns every key's total number of events.
func (t *Truth) Totals() map[AppKey]uint64 {
	out := make(map[AppKey]uint64, len(t.Keys))
	for _, k := range t.Keys {
		var sum uint64
		for _, n := range k.Counts {
			sum += n
		}
		out[AppKey{k.App, k.Key}] = sum
	}
	return out
}

// SourceShare is one source's share of a key's events.
type SourceShare struct {
	Source string  // as the run's records name it (SourceName)
	Share  float64 // 0..1
}

// SourceName returns the name of instance i as the run's records carry it:
// SourceName(Workload.Form, i).
func (t *Truth) SourceName(i int) string {
	f, _ := ParseForm(t.Workload.Form)
	return SourceName(f, i)
}

// find returns the truth of (app, key), or nil.
func (t *Truth) find(app, key string) *TruthKey {
	for i := range t.Keys {
		if k := &t.Keys[i]; k.App == app && k.Key == key {
			return k
		}
	}
	return nil
}

// SourceCounts returns the events of (app, key) per source over the run,
// for the sources that sent any, named as the records name them. It is nil
// when the Truth has no per-source counts of the key: the run had no
// sources (Workload.Sources 0), or the key is not planted.
func (t *Truth) SourceCounts(app, key string) map[string]uint64 {
	k := t.find(app, key)
	if k == nil || k.Sources == nil {
		return nil
	}
	out := make(map[string]uint64)
	for i, n := range k.Sources {
		if n > 0 {
			out[t.SourceName(i)] = n
		}
	}
	return out
}

// SourceShares returns each source's share (0..1, summing to 1) of the
// events of (app, key) over the run; nil as SourceCounts, and empty for a
// key that sent nothing. hotspotd's `sources` of /v1/hotkeys/{key} are
// shares of the key's recent rounds: they match these in expectation when
// the split holds over the run (uniform, SourceSkew, a Flash's TopShare),
// within the sampling noise of the rounds' counts.
func (t *Truth) SourceShares(app, key string) map[string]float64 {
	counts := t.SourceCounts(app, key)
	if counts == nil {
		return nil
	}
	var total uint64
	for _, n := range counts {
		total += n
	}
	out := make(map[string]float64, len(counts))
	for s, n := range counts {
		out[s] = float64(n) / float64(total)
	}
	return out
}

// TopSources returns the n busiest sources of (app, key) over the run
// (all of them when n <= 0), busiest first, ties in instance order; nil as
// SourceCounts.
func (t *Truth) TopSources(app, key string, n int) []SourceShare {
	k := t.find(app, key)
	if k == nil || k.Sources == nil {
		return nil
	}
	var total uint64
	idx := make([]int, 0, len(k.Sources))
	for i, c := range k.Sources {
		if c > 0 {
			idx = append(idx, i)
			total += c
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(k.Sources[b], k.Sources[a]) })
	if n > 0 && len(idx) > n {
		idx = idx[:n]
	}
	out := make([]SourceShare, len(idx))
	for j, i := range idx {
		out[j] = SourceShare{Source: t.SourceName(i), Share: float64(k.Sources[i]) / float64(total)}
	}
	return out
}

// DistinctSources returns how many sources sent (app, key) at least one
// event over the run (hotspotd's `distinct_sources` estimates the same
// over its rounds); 0 when the Truth has no per-source counts of the key.
func (t *Truth) DistinctSources(app, key string) int {
	k := t.find(app, key)
	if k == nil {
		return 0
	}
	n := 0
	for _, c := range k.Sources {
		if c > 0 {
			n++
		}
	}
	return n
}

// WriteFile writes t as JSON to path (the format is in docs/loadgen.md).
func (t *Truth) WriteFile(path string) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("loadgen: encode truth: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("loadgen: write truth: %w", err)
	}
	return nil
}

// grow makes room for n slots.
func (t *Truth) grow(n int) {
	if n <= t.Slots {
		return
	}
	for i := range t.Keys {
		c := t.Keys[i].Counts
		for len(c) < n {
			c = append(c, 0)
		}
		t.Keys[i].Counts = c
	}
	t.Slots = n
}
