package loadgen

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseFlash(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Flash
	}{
		{"item:hot@10s+2s=3000", Flash{Key: "item:hot", Start: 10 * time.Second, Ramp: 2 * time.Second, Rate: 3000}},
		{"shop/cart:7@0s..30s=1.2x", Flash{App: "shop", Key: "cart:7", End: 30 * time.Second, Rate: 1200}},
		{"a/b/c@1m+500ms..2m=0.5", Flash{App: "a", Key: "b/c", Start: time.Minute, Ramp: 500 * time.Millisecond, End: 2 * time.Minute, Rate: 0.5}},
		{"/api/v1@5s=800", Flash{Key: "/api/v1", Start: 5 * time.Second, Rate: 800}},
		{"default//api/v1@5s=800", Flash{App: "default", Key: "/api/v1", Start: 5 * time.Second, Rate: 800}},
		{"user@example.com@0s=10x", Flash{Key: "user@example.com", Rate: 10000}},
		{"a=b@0s=1", Flash{Key: "a=b", Rate: 1}},
	} {
		got, err := ParseFlash(tc.spec, 1000)
		if err != nil || got != tc.want {
			t.Errorf("ParseFlash(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			continue
		}
		// String is parsed back to the same Flash.
		if back, err := ParseFlash(got.String(), 1000); err != nil || back != got {
			t.Errorf("ParseFlash(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
}

func TestParseFlashErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"item@1s", "no '=RATE'"},
		{"item=5", "no '@START'"},
		{"@1s=5", "empty key"},
		{"shop/@1s=5", "empty key"},
		{"item@soon=5", "START"},
		{"item@1s+fast=5", "RAMP"},
		{"item@1s..later=5", "END"},
		{"item@1s=lots", "RATE"},
		{"item@1s=0", "RATE must be > 0"},
		{"item@1s=-3", "RATE must be > 0"},
		{"item@-1s=3", "negative"},
		{"item@5s..5s=3", "END must be after START"},
		{"item@5s=2x", ""}, // valid with a threshold; see below
	} {
		_, err := ParseFlash(tc.spec, 1000)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ParseFlash(%q): %v, want no error", tc.spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlash(%q): error %v, want one mentioning %q", tc.spec, err, tc.want)
		}
	}
	if _, err := ParseFlash("item@5s=2x", 0); err == nil {
		t.Errorf("ParseFlash with a multiple and no threshold: no error, want one")
	}
}

func TestPlanted(t *testing.T) {
	got := Planted("shop", 1000, 0.5, 1.2, 10)
	want := []Flash{
		{App: "shop", Key: "planted:0.5x", Rate: 500},
		{App: "shop", Key: "planted:1.2x", Rate: 1200},
		{App: "shop", Key: "planted:10x", Rate: 10000},
	}
	if len(got) != len(want) {
		t.Fatalf("Planted: %d keys, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Planted[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestFlashCounts generates flash crowds tick by tick and checks the events
// sent per second against the integral of the target rate.
func TestFlashCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Flash
		tick time.Duration
		perS []uint64 // events in each second of a 6 s run
	}{
		{"step", Flash{Key: "a", Start: time.Second, Rate: 1000}, 10 * time.Millisecond,
			[]uint64{0, 1000, 1000, 1000, 1000, 1000}},
		// Ramp over [1s, 3s): 1000*t²/4 → 250 in the first second, 750 in the second.
		{"ramp", Flash{Key: "a", Start: time.Second, Ramp: 2 * time.Second, End: 5 * time.Second, Rate: 1000}, 10 * time.Millisecond,
			[]uint64{0, 250, 750, 1000, 1000, 0}},
		// The ramp is cut off by End at 2 s: 1000*1²/10 = 100 events.
		{"cut ramp", Flash{Key: "a", Start: time.Second, Ramp: 5 * time.Second, End: 2 * time.Second, Rate: 1000}, 5 * time.Millisecond,
			[]uint64{0, 100, 0, 0, 0, 0}},
		// A fractional rate: 3.333 events per 10 ms tick, carried over.
		{"fraction", Flash{Key: "a", Rate: 333.3}, 10 * time.Millisecond,
			[]uint64{333, 333, 333, 334, 333, 333}}, // floor(333.3*t) steps
		{"slow", Flash{Key: "a", Start: 500 * time.Millisecond, Rate: 0.5}, 20 * time.Millisecond,
			[]uint64{0, 0, 1, 0, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, Config{Rate: NoBackground, Flashes: []Flash{tc.f}, Tick: tc.tick, Form: FormNDJSON})
			g, err := newGenerator(c, 1_000_000)
			if err != nil {
				t.Fatal(err)
			}
			perSec := int64(time.Second / tc.tick)
			var prevCum float64
			for i := range perSec * int64(len(tc.perS)) {
				recs := g.step(i)
				var n int64
				for _, r := range recs {
					n += r.Events
				}
				// Every tick sends the exact difference of floors of the integral.
				cum := tc.f.cumulative(time.Duration(i+1) * tc.tick)
				if want := int64(math.Floor(cum) - math.Floor(prevCum)); n != want {
					t.Fatalf("tick %d sent %d events, want %d", i, n, want)
				}
				prevCum = cum
			}
			counts := g.truth.Keys[0].Counts
			for s, want := range tc.perS {
				var got uint64
				for _, n := range counts[s*10 : (s+1)*10] {
					got += n
				}
				if got != want {
					t.Errorf("second %d: %d events, want %d", s, got, want)
				}
			}
		})
	}
}

// testConfig resolves c with a fake sink and a fixed seed.
func testConfig(t testing.TB, c Config) Config {
	t.Helper()
	if c.Sink == nil {
		c.Sink = &fakeSink{}
	}
	if c.Seed == 0 {
		c.Seed = 42
	}
	r, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRateAt: the rate ramps up from Start over Ramp, holds, and stops at
// End; the count it implies is cumulative's.
func TestRateAt(t *testing.T) {
	f := Flash{Key: "k", Start: 10 * time.Second, Ramp: 2 * time.Second, End: 20 * time.Second, Rate: 3000}
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{{0, 0}, {10 * time.Second, 0}, {11 * time.Second, 1500}, {12 * time.Second, 3000}, {19 * time.Second, 3000}, {20 * time.Second, 0}} {
		if got := f.RateAt(tc.d); got != tc.want {
			t.Errorf("RateAt(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
	if got := (Flash{Rate: 5}).RateAt(0); got != 5 {
		t.Errorf("a step at 0: RateAt(0) = %v, want 5", got)
	}
}
