package aggregator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Paths served by Handler.
const (
	PartialsPath = "/internal/v1/partials" // POST: a wire partial-count batch; 204 when counted
	TopPath      = "/internal/v1/top"      // GET ?app=&n=: this shard's busiest keys
	KeyPath      = "/internal/v1/key"      // GET ?app=&key=: one key's state at this shard
)

// Handler serves the shard's internal API, for hotspotd's mux:
//
//	POST PartialsPath  body: wire partial-count batch -> 204; 400 {"error":...} on a bad
//	                   body (nothing counted); 413 over MaxBodyBytes
//	GET  TopPath       ?app=APP&n=N (default 10, at most TopK) -> 200 {"app":..,"keys":[KeyState..]}
//	GET  KeyPath       ?app=APP&key=KEY -> 200 KeyState; 404 when not tracked here
//
// app defaults to "default" as in the access-event contract.
func (a *Aggregator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PartialsPath, a.servePartials)
	mux.HandleFunc("GET "+TopPath, a.serveTop)
	mux.HandleFunc("GET "+KeyPath, a.serveKey)
	return mux
}

func (a *Aggregator) servePartials(w http.ResponseWriter, r *http.Request) {
	bp, _ := a.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer a.bufs.Put(bp)
	buf := bytes.NewBuffer((*bp)[:0])
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	*bp = buf.Bytes()[:0] // keep the grown buffer for the next request
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			a.m.rejected.WithLabelValues("too_large").Inc()
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", mbe.Limit))
			return
		}
		a.m.rejected.WithLabelValues("bad_body").Inc()
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	n, err := a.apply(buf.Bytes(), time.Now())
	if err != nil {
		a.m.rejected.WithLabelValues("bad_body").Inc()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.m.batches.Inc()
	a.m.entries.Add(float64(n))
	w.WriteHeader(http.StatusNoContent)
}

// apply counts every entry of a partials body received at now; on a bad
// body it counts nothing (wire.DecodePartials validates the whole body before
// the first callback), so the detector can retry without double counting. A
// batch whose (source, sequence) was applied already is acknowledged and
// not counted again: its first delivery succeeded but was answered too late.
func (a *Aggregator) apply(body []byte, now time.Time) (int, error) {
	h, err := wire.ReadPartialHeader(body)
	if err != nil {
		return 0, fmt.Errorf("aggregator: partials: %w", err)
	}
	// The counts are placed at the event time they happened over: a
	// detector catching up on a backlog (after a rebalance, a pause, an
	// outage) sends many flushes' worth at once, and counting them as
	// received now would make keys hot that were not; what is older than
	// the window is not counted at all.
	t := a.t
	sp := span{buckets: t.spanBuckets(time.Duration(h.Span) * time.Millisecond)}
	if h.End > 0 {
		end := min(h.End, now.UnixMilli())
		sp.from, sp.end = max(end-h.Span, 1)*int64(time.Millisecond), end*int64(time.Millisecond)
	}
	n, hot := 0, false
	t.mu.Lock()
	src := t.source(h.Source)
	src.heard = now
	t.heard(now)
	if src.applied(h.Seq) {
		t.mu.Unlock()
		a.m.duplicates.Inc()
		return 0, nil
	}
	if h.End > 0 {
		src.end = max(src.end, h.End)
	}
	t.setCover(now)
	_, err = wire.DecodePartials(body, func(app, key []byte, count uint64) {
		n++
		if t.add(app, key, count, now, sp) {
			hot = true
		}
	})
	if err == nil {
		src.remember(h.Seq)
	}
	t.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("aggregator: partials: %w", err)
	}
	if hot {
		a.wake()
	}
	return n, nil
}

func (a *Aggregator) serveTop(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	app := appParam(q.Get("app"))
	n := 10
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "n must be an integer >= 0")
			return
		}
		n = v
	}
	writeJSON(w, http.StatusOK, struct {
		App   string     `json:"app"`
		Shard string     `json:"shard"`
		Keys  []KeyState `json:"keys"`
	}{app, a.cfg.ID, a.Top(app, n)})
}

func (a *Aggregator) serveKey(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "key is required")
		return
	}
	st, ok := a.Key(appParam(q.Get("app")), key)
	if !ok {
		writeError(w, http.StatusNotFound, "key not tracked by this shard")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func appParam(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}
