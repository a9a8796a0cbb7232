package loadgen

import (
	"encoding/json"
	"fmt"
	"os"
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
}

// TruthKey is one key's send log.
type TruthKey struct {
	App      string   `json:"app"`
	Key      string   `json:"key"`
	Rank     uint64   `json:"rank,omitempty"`    // Zipf rank when it is a background key
	Planted  bool     `json:"planted,omitempty"` // true when a Flash sends it
	Expected float64  `json:"expected_rate"`     // background expectation plus planted target rates, events/s
	Counts   []uint64 `json:"counts"`            // events sent per slot
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
