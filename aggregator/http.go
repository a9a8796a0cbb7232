package aggregator

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// Handler serves the shard's internal API (the paths and answers of package
// shardapi), for hotspotd's mux. The app parameter defaults to
// access.DefaultApp, as in the access-event contract.
func (a *Aggregator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+shardapi.PartialsPath, a.servePartials)
	mux.HandleFunc("GET "+shardapi.TopPath, a.serveTop)
	mux.HandleFunc("GET "+shardapi.KeyPath, a.serveKey)
	mux.HandleFunc("GET "+shardapi.EffectsPath, a.serveEffects)
	mux.HandleFunc("GET "+shardapi.InstancesPath, a.serveInstances)
	return mux
}

func (a *Aggregator) servePartials(w http.ResponseWriter, r *http.Request) {
	if !checkPartialsType(w, r) {
		a.m.rejected.WithLabelValues("content_type").Inc()
		return
	}
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
			httpjson.Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", mbe.Limit))
			return
		}
		a.m.rejected.WithLabelValues("bad_body").Inc()
		httpjson.Error(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	if err := a.TakePartials(buf.Bytes()); err != nil {
		httpjson.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TakePartials counts a partials body (what POST shardapi.PartialsPath carries)
// as the shard's handler does: a bad body is refused whole, and a batch
// whose (source, sequence) was taken already is acknowledged and not
// counted again. A detector in the same process hands its batches for this
// shard over here instead of over HTTP (internal/shardclient's Config.Self). body is not kept.
func (a *Aggregator) TakePartials(body []byte) error {
	n, err := a.apply(body, time.Now())
	if err != nil {
		a.m.rejected.WithLabelValues("bad_body").Inc()
		return err
	}
	a.m.batches.Inc()
	a.m.entries.Add(float64(n))
	return nil
}

// apply counts every entry of a partials body received at now; on a bad
// body it counts nothing (wire.DecodePartialsWith validates the whole body
// before the first callback), so the detector can retry without double
// counting. A batch whose (source, sequence) was applied already is
// acknowledged and not counted again: its first delivery succeeded but was
// answered too late. A version 6 body's sources and effects are taken after
// its counts, so that a key that the counts brought near its threshold
// keeps the sources of the same round (near.go); the sketches of distinct
// sources are merged after the table lock is released.
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
	spanD := clampSpan(h.Span)
	sp := span{buckets: t.spanBuckets(spanD)}
	end := min(h.End, now.UnixMilli()) // never ahead of this clock
	if h.End > 0 {
		sp.from = max(end-spanD.Milliseconds(), 1) * int64(time.Millisecond)
		sp.end = end * int64(time.Millisecond)
		if spanD > 0 {
			// The entries stamped End stand for the time after it as
			// those stamped earlier do: a round that read two records
			// 100 ms apart (a producer's two flushes) covers two buckets,
			// not all in the first one. Without this the accesses of
			// a stamp on a bucket boundary would land a bucket early.
			sp.end += t.p.bucketNs
		}
		sp.setWeights(h)
	}
	n, hot := 0, false
	var sketches []pendingSketch // merged once the table lock is released
	t.mu.Lock()
	src := t.source(h.Source)
	if !src.heard.IsZero() && now.Sub(src.heard) >= t.p.stall {
		src.back = now // silent for Stall: restarted, rejoined, resumed
	}
	src.heard = now
	t.heard(now)
	if src.applied(h.Seq) {
		t.mu.Unlock()
		a.m.duplicates.Inc()
		return 0, nil
	}
	t.setReach(now)
	_, err = wire.DecodePartialsWith(body, func(app, key []byte, count, writes, bytes, writeBytes uint64) {
		n++
		if t.add(app, key, tally{count, writes, bytes, writeBytes}, now, sp) {
			hot = true
		}
	}, wire.PartialExtras{
		Sources: func(app, key []byte, total uint64, top []wire.SourceCount, distinct []byte) {
			if p, ok := t.keySources(app, key, total, top, distinct, now); ok {
				sketches = append(sketches, p)
			}
		},
		Effect:   func(app, key []byte, c wire.EffectCounts) { t.effect(app, key, c, now) },
		Instance: func(app, src []byte, c wire.EffectCounts) { t.instance(app, src, c, now) },
	})
	if err == nil {
		src.remember(h.Seq)
		// What this detector has reported now reaches End, or Reach when
		// one of its partitions is late (then even a round without
		// counts holds the reach): the window the rule reads may move,
		// and keys that got no counts now may cross.
		reach := end
		if h.Reach > 0 {
			reach = min(h.Reach, now.UnixMilli())
			if h.End > 0 {
				reach = min(reach, end)
			}
		}
		src.idle = reach == 0
		if reach > 0 {
			src.end = max(src.end, reach)
		}
		prev := t.evalEnd
		if t.setReach(now); t.evalEnd != prev && t.promoteAll(now) {
			hot = true
		}
	}
	t.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("aggregator: partials: %w", err)
	}
	for _, p := range sketches {
		p.merge(a.m)
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
			httpjson.Error(w, http.StatusBadRequest, "n must be an integer >= 0")
			return
		}
		n = v
	}
	keys := a.Top(app, n)
	if s := q.Get("rule"); s != "" {
		rule, err := strconv.Atoi(s)
		if err != nil || rule < 0 {
			httpjson.Error(w, http.StatusBadRequest, "rule must be an integer >= 0")
			return
		}
		keys = a.RuleTop(app, rule, n)
	}
	httpjson.Write(w, http.StatusOK, shardapi.Top{App: app, Shard: a.cfg.ID, Keys: keys})
}

func (a *Aggregator) serveKey(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key")
	if key == "" {
		httpjson.Error(w, http.StatusBadRequest, "key is required")
		return
	}
	st, ok := a.Key(appParam(q.Get("app")), key)
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "key not tracked by this shard")
		return
	}
	httpjson.Write(w, http.StatusOK, st)
}

// serveEffects answers EffectsPath: the effect of app's keys, of every
// app's without app.
func (a *Aggregator) serveEffects(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, shardapi.Effects{Shard: a.cfg.ID, Keys: a.Effects(r.URL.Query().Get("app"))})
}

// serveInstances answers InstancesPath: the effect of app's instances, of
// every app's without app.
func (a *Aggregator) serveInstances(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, shardapi.Instances{Shard: a.cfg.ID, Instances: a.Instances(r.URL.Query().Get("app"))})
}

func appParam(s string) string {
	if s == "" {
		return wire.DefaultApp
	}
	return s
}
