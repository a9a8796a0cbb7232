package aggregator

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/hotset/decision"
)

// fakeRecorder keeps what it is told.
type fakeRecorder struct {
	mu sync.Mutex
	ds []decision.Decision
}

func (f *fakeRecorder) Record(ds []decision.Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ds = append(f.ds, ds...)
}

func (f *fakeRecorder) got() []decision.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]decision.Decision(nil), f.ds...)
}

func TestRecorderGetsEveryDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &fakeRecorder{}
		a := mustNew(t, Config{Recorder: rec}, &fakePub{})
		stop := startRun(t, a)
		start := time.Now()

		a.Add("shop", "k", 3000) // promoted at once
		synctest.Wait()
		if got := rec.got(); len(got) != 1 {
			t.Fatalf("after the promotion the recorder got %+v, want one decision", got)
		}
		heartbeats(t, a, 5*time.Second) // cold: the window empties after 1s, then the 2s hold
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		want := []decision.Decision{
			{App: "shop", Key: "k", Kind: decision.Promoted, At: start, Rate: 3000, Rule: decision.DefaultRule},
			{App: "shop", Key: "k", Kind: decision.Demoted, At: start.Add(3 * time.Second), Rate: 0, Rule: decision.DefaultRule},
		}
		got := rec.got()
		if len(got) != len(want) {
			t.Fatalf("decisions = %+v, want %+v", got, want)
		}
		for i := range want {
			// The demotion's rate is whatever the window held when the hold ran out.
			if got[i].App != want[i].App || got[i].Key != want[i].Key || got[i].Kind != want[i].Kind ||
				!got[i].At.Equal(want[i].At) || got[i].Rule != want[i].Rule || (i == 0 && got[i].Rate != want[i].Rate) {
				t.Errorf("decision %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if got[1].Rate >= 800 {
			t.Errorf("demotion rate %v, want below the low mark 800", got[1].Rate)
		}
	})
}

func TestNoRecorderKeepsNoDecisions(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	a.Add("shop", "k", 3000)
	if ds := a.t.takeDecided(time.Now()); len(ds) != 0 {
		t.Errorf("decisions kept without a Recorder: %+v", ds)
	}
}
