package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// TestKeyDelays: the report lists every key at 1.2x the threshold or more,
// by crossing, with its delays to ZooKeeper and to the L1 (-1: never seen).
func TestKeyDelays(t *testing.T) {
	// 10 slots of 100 ms make the 1 s window; threshold 10/s: 10 events.
	counts := func(perSlot ...uint64) []uint64 { return append(make([]uint64, 0, 20), perSlot...) }
	tr := &loadgen.Truth{StartMs: 1_000_000, SlotMs: 100, Slots: 6, Threshold: 10, Keys: []loadgen.TruthKey{
		{App: "a", Key: "late", Counts: counts(0, 0, 0, 12, 12, 0)}, // crosses at the end of slot 3
		{App: "a", Key: "early", Counts: counts(5, 7, 0, 0, 0, 0)},  // at the end of slot 1; 12/s at most
		{App: "a", Key: "lost", Counts: counts(20, 0, 0, 0, 0, 0)},  // at the end of slot 0, never seen
		{App: "a", Key: "under", Counts: counts(11, 0, 0, 0, 0, 0)}, // 11/s: under 1.2x, not listed
	}}
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	seen := observed{
		published: map[loadgen.AppKey]time.Time{{App: "a", Key: "late"}: at(450), {App: "a", Key: "early"}: at(230),
			{App: "a", Key: "under"}: at(150)},
		inL1: map[loadgen.AppKey]time.Time{{App: "a", Key: "late"}: at(470)},
	}
	got := keyDelays(tr, 10, seen)
	want := []KeyDelay{
		{Key: "a/lost", CrossedMs: 1_000_100, ZKMs: -1, L1Ms: -1},
		{Key: "a/early", CrossedMs: 1_000_200, ZKMs: 30, L1Ms: -1},
		{Key: "a/late", CrossedMs: 1_000_400, ZKMs: 50, L1Ms: 70},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keyDelays:\ngot  %v\nwant %v", got, want)
	}
}
