package aggregator

import (
	"math"
	"mime"
	"net/http"
	"time"

	"github.com/hotspot-dev/hotspot/internal/httpjson"
)

// The aggregator takes counts from the network, so everything a batch can
// make it hold is bounded here: counts saturate instead of wrapping, a batch's
// span is clamped before it is turned into buckets, new apps are refused once
// MaxApps are tracked (checked before anything is allocated for them), and an
// app holds at most MaxHotPerApp hot keys, the coldest leaving first.

// maxSpan bounds the event time one partials batch may claim to cover. A
// detector catching up on a backlog sends a few flushes' worth; an hour is
// far beyond that and keeps the conversion to nanoseconds from overflowing.
const maxSpan = time.Hour

// clampSpan turns a batch's span in milliseconds into a duration within
// [0, maxSpan].
func clampSpan(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(min(ms, int64(maxSpan/time.Millisecond))) * time.Millisecond
}

// satAdd returns a+b, or MaxUint64 when the sum would overflow.
func satAdd(a, b uint64) uint64 {
	if b > math.MaxUint64-a {
		return math.MaxUint64
	}
	return a + b
}

// admitApp reports whether (app) may be tracked: it already is, or there is
// room for one more. The caller holds t.mu.
func (t *table) admitApp(app []byte) bool {
	if t.apps[string(app)] != nil {
		return true
	}
	if len(t.apps) >= t.p.maxApps {
		t.m.evicted.WithLabelValues("refused_app").Inc()
		return false
	}
	return true
}

// makeHotRoom is called when e is about to turn hot in an app that already
// holds maxHot hot keys: the coldest of them (by window total relative to its
// rule's threshold) is demoted if it is colder than e, and e is refused
// otherwise. It reports whether e may
// turn hot. O(maxHot), paid only by a promotion into a full app. The caller
// holds t.mu.
func (t *table) makeHotRoom(e *entry) bool {
	as := e.app
	if len(as.hot) < t.p.maxHot {
		return true
	}
	// Keys compare by their window totals as fractions of their own
	// rules' threshold totals, so that keys of other rules compare fairly.
	heat := func(x *entry) float64 { return float64(x.win.evalTo(t.evalEnd)) / x.r.hotSum }
	var coldest *entry
	for _, h := range as.hot {
		h.win.advance(e.win.last)
		if coldest == nil || heat(h) < heat(coldest) {
			coldest = h
		}
	}
	if coldest == nil || heat(coldest) >= heat(e) {
		t.m.evicted.WithLabelValues("hot_cap_refused").Inc()
		return false
	}
	coldest.hot, coldest.since, coldest.below, coldest.seed = false, time.Time{}, time.Time{}, 0
	delete(as.hot, coldest.key)
	as.dirty = true
	t.m.evicted.WithLabelValues("hot_cap").Inc()
	return true
}

// partialsType is the Content-Type of a partials body. Requiring it keeps a
// browser's cross-site "simple" POST (text/plain, form types) from ever
// being counted, whatever else protects the route.
const partialsType = "application/octet-stream"

// checkPartialsType writes 415 and reports false unless r carries a
// partials body's Content-Type.
func checkPartialsType(w http.ResponseWriter, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == partialsType {
		return true
	}
	httpjson.Error(w, http.StatusUnsupportedMediaType, "Content-Type must be "+partialsType)
	return false
}
