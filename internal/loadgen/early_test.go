package loadgen

import "testing"

// TestEarlySend plays a key jumping to 3000/s (threshold 1000/s, 30 events
// per 10 ms tick) with EarlyCount 100: its count reaches 100 in the fourth
// tick of each 100 ms interval, so it is sent then, once per interval, until
// its trailing second holds 1000 events (during the fourth interval); the
// truth and the totals are those of a run without early sends.
func TestEarlySend(t *testing.T) {
	const startMs = 1_700_000_000_000
	for _, tc := range []struct {
		name      string
		early     uint64
		wantEarly int64
	}{
		{"off", 0, 0},
		{"100", 100, 3},
		{"above an interval's count", 301, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, Config{Rate: NoBackground, Threshold: 1000, EarlyCount: tc.early,
				Flashes: []Flash{{Key: "flash", Rate: 3000}}})
			g, err := newGenerator(c, startMs)
			if err != nil {
				t.Fatal(err)
			}
			var values [][]byte
			var earlyTicks []int64
			for i := range int64(100) { // 1 s
				recs := g.step(i)
				if (i+1)%10 != 0 && len(recs) > 0 {
					earlyTicks = append(earlyTicks, i)
				}
				for _, r := range recs {
					values = append(values, r.Value)
				}
			}
			for _, r := range g.finish() {
				values = append(values, r.Value)
			}
			st := g.stats
			st.Truth = g.truth
			d := checkAgainstTruth(t, values, st)
			if got := d.totals[AppKey{"app0", "flash"}]; got != 3000 || st.EarlyRecords != tc.wantEarly {
				t.Errorf("%d events in %d early records (at ticks %v), want 3000 in %d", got, st.EarlyRecords, earlyTicks, tc.wantEarly)
			}
			if tc.wantEarly > 0 {
				if want := []int64{3, 13, 23}; len(earlyTicks) != 3 || earlyTicks[0] != want[0] || earlyTicks[2] != want[2] {
					t.Errorf("early records at ticks %v, want %v", earlyTicks, want)
				}
				// An early record carries its interval's start, as the
				// interval's batch would.
				if ts := d.minTS[AppKey{"app0", "flash"}]; ts != startMs {
					t.Errorf("first event stamped +%d ms, want +0", ts-startMs)
				}
			}
		})
	}
}
