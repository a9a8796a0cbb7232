package hotcache

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func testCounter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	b := &breaker{failures: 3, openFor: time.Second, now: func() time.Time { return now }}
	steps := []struct {
		do        string // "fail", "ok", "wait" (advance 1 s), or "" (only check)
		wantAllow bool
		wantState int
	}{
		{"fail", true, stateClosed},
		{"fail", true, stateClosed},
		{"ok", true, stateClosed}, // success resets the count
		{"fail", true, stateClosed},
		{"fail", true, stateClosed},
		{"fail", false, stateOpen},
		{"", false, stateOpen},
		{"wait", true, stateHalfOpen}, // the probe
		{"", false, stateHalfOpen},    // only one probe at a time
		{"fail", false, stateOpen},    // failed probe: open again
		{"wait", true, stateHalfOpen},
		{"ok", true, stateClosed},
	}
	for i, s := range steps {
		switch s.do {
		case "fail":
			b.failure()
		case "ok":
			b.success()
		case "wait":
			now = now.Add(time.Second)
		}
		allow := b.allow()
		if allow != s.wantAllow || int(b.state.Load()) != s.wantState {
			t.Fatalf("step %d (%s): allow %v state %d, want %v %d", i, s.do, allow, b.state.Load(), s.wantAllow, s.wantState)
		}
	}
}
