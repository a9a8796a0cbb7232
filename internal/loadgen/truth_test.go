package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func truthOf(counts ...[]uint64) *Truth {
	t := &Truth{Version: TruthVersion, StartMs: 1_000_000, SlotMs: 100, Threshold: 1000}
	for i, c := range counts {
		t.Keys = append(t.Keys, TruthKey{App: "a", Key: string(rune('p' + i)), Counts: c})
		t.Slots = len(c)
	}
	return t
}

func TestCrossings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		counts    []uint64
		threshold float64
		window    time.Duration
		want      int // slot whose end is the crossing; -1 for none
	}{
		{"steady at the threshold", []uint64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, 1000, time.Second, 9},
		{"just below, then at", []uint64{99, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, 1000, time.Second, 10},
		{"never", []uint64{99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99}, 1000, time.Second, -1},
		{"burst in one slot", []uint64{0, 0, 1000, 0}, 1000, time.Second, 2},
		{"burst spread over the window edge", []uint64{500, 0, 0, 0, 0, 0, 0, 0, 0, 0, 500, 500}, 1000, time.Second, 11},
		{"short window", []uint64{50, 100, 50, 100}, 1000, 100 * time.Millisecond, 1},
		{"window rounds to 2 slots", []uint64{60, 60, 60}, 600, 180 * time.Millisecond, 1},
		{"tiny window is one slot", []uint64{0, 10}, 100, time.Millisecond, 1},
		// Slot i holds 10i: the window ending at i holds 100i - 450.
		{"ramp", []uint64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150}, 1000, time.Second, 15},
		{"empty", nil, 1, time.Second, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := truthOf(tc.counts)
			got, ok := tr.Crossings(tc.threshold, tc.window)[AppKey{"a", "p"}]
			switch {
			case tc.want < 0 && ok:
				t.Errorf("crossing at %v, want none", got)
			case tc.want >= 0 && !ok:
				t.Errorf("no crossing, want one at the end of slot %d", tc.want)
			case tc.want >= 0 && !got.Equal(time.UnixMilli(1_000_000+int64(tc.want+1)*100)):
				t.Errorf("crossing at slot end %d ms, want slot %d (end %d ms)", got.UnixMilli()-1_000_000, tc.want, (tc.want+1)*100)
			}
		})
	}
}

// TestCrossingOfLateSlot: a slot the generator handed over late (it had
// fallen behind) dates a crossing in it at the hand-over, never before its
// events existed; a late slot before the crossing changes nothing.
func TestCrossingOfLateSlot(t *testing.T) {
	tr := truthOf([]uint64{0, 0, 1000, 0})
	tr.LateMs = map[int]int64{1: 1_000_450, 2: 1_000_420}
	got := tr.Crossings(1000, time.Second)[AppKey{"a", "p"}]
	if want := time.UnixMilli(1_000_420); !got.Equal(want) {
		t.Errorf("crossing at %d ms, want the late hand-over at %d ms", got.UnixMilli(), want.UnixMilli())
	}
	tr.LateMs = map[int]int64{2: 1_000_250} // handed over before the slot's end: the end stands
	if got, want := tr.Crossings(1000, time.Second)[AppKey{"a", "p"}], time.UnixMilli(1_000_300); !got.Equal(want) {
		t.Errorf("crossing at %d ms, want the slot's end at %d ms", got.UnixMilli(), want.UnixMilli())
	}
}

func TestMaxRate(t *testing.T) {
	tr := truthOf(
		[]uint64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
		[]uint64{0, 0, 1200, 0, 0},
		[]uint64{0, 0, 0},
		[]uint64{80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 0, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80},
	)
	for _, tc := range []struct {
		window time.Duration
		want   map[string]float64
	}{
		{time.Second, map[string]float64{"p": 1000, "q": 1200, "r": 0, "s": 800}},
		{500 * time.Millisecond, map[string]float64{"p": 1000, "q": 2400, "r": 0, "s": 800}},
		{100 * time.Millisecond, map[string]float64{"p": 1000, "q": 12000, "r": 0, "s": 800}},
	} {
		got := tr.MaxRate(tc.window)
		for k, want := range tc.want {
			if g := got[AppKey{"a", k}]; g != want {
				t.Errorf("MaxRate(%v)[%s] = %v, want %v", tc.window, k, g, want)
			}
		}
	}
	totals := tr.Totals()
	for k, want := range map[string]uint64{"p": 1100, "q": 1200, "r": 0, "s": 1680} {
		if got := totals[AppKey{"a", k}]; got != want {
			t.Errorf("Totals[%s] = %d, want %d", k, got, want)
		}
	}
}

func TestTruthFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "truth.json")
	tr := truthOf([]uint64{1, 2, 3}, []uint64{0, 0, 7})
	tr.Workload = Workload{Rate: 5, Keys: 10, Skew: 0.8, KeyPrefix: "k:", Apps: []string{"a"}, Flashes: []string{"a/x@0s=1"}, Form: "json", TickMs: 10, FlushMs: 100, Seed: 9}
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTruth(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.StartMs != tr.StartMs || back.Slots != 3 || len(back.Keys) != 2 || back.Keys[1].Counts[2] != 7 ||
		back.Workload.Seed != 9 || back.Workload.Flashes[0] != "a/x@0s=1" {
		t.Errorf("read back %+v, want %+v", back, tr)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"version", `{"version":2,"slot_ms":100}`, "version 2"},
		{"slot", `{"version":1,"slot_ms":0}`, "slot_ms"},
		{"counts", `{"version":1,"slot_ms":100,"slots":2,"keys":[{"app":"a","key":"k","counts":[1]}]}`, "1 counts, want 2"},
		{"twice", `{"version":1,"slot_ms":100,"slots":1,"keys":[{"app":"a","key":"k","counts":[1]},{"app":"a","key":"k","counts":[1]}]}`, "twice"},
		{"json", `{"version":`, "decode"},
	} {
		p := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTruth(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadTruth: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// ReadTruth reads and checks a file written by WriteFile, as a scoring tool
// would.
func ReadTruth(path string) (*Truth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: read truth: %w", err)
	}
	var t Truth
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("loadgen: decode truth %s: %w", path, err)
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("loadgen: truth %s: %w", path, err)
	}
	return &t, nil
}

func (t *Truth) check() error {
	if t.Version != TruthVersion {
		return fmt.Errorf("version %d, want %d", t.Version, TruthVersion)
	}
	if t.SlotMs <= 0 {
		return errors.New("slot_ms must be > 0")
	}
	seen := make(map[AppKey]bool, len(t.Keys))
	for _, k := range t.Keys {
		ak := AppKey{k.App, k.Key}
		if seen[ak] {
			return fmt.Errorf("key %q of app %q listed twice", k.Key, k.App)
		}
		seen[ak] = true
		if len(k.Counts) != t.Slots {
			return fmt.Errorf("key %q of app %q has %d counts, want %d", k.Key, k.App, len(k.Counts), t.Slots)
		}
	}
	return nil
}
