package httpapi

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"embed"
	"io/fs"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/pinstore"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// Config wires the API to the process's views of the cluster.
type Config struct {
	HotSet      func() *hotwatch.Snapshot // the published hot set; required
	Aggregators Aggregators               // the aggregator shards (a *shardclient.Client); required
	Ready       func() error              // nil when the process serves its roles; nil func means always ready
	Events      *Events                   // recent hot-set changes for /v1/events and the page; nil: none kept
	// Threshold is the cluster's hot-key rate, shown by the page
	// (/v1/config); 0 leaves it out.
	Threshold float64
	// Topic is the access topic this process's detector consumes
	// (/v1/config), so that tools can tell when they write elsewhere; ""
	// (no detector role) leaves it out.
	Topic string
	// Lists keeps the operators' pins and blocks; nil: the routes answer 501.
	Lists Lists
	// Rules keeps the apps' rule lists; nil: the routes answer 501.
	Rules Rules
	// AdminToken guards the writes of pins, blocks, rules and webhooks
	// (Authorization: Bearer TOKEN); "" refuses every write.
	AdminToken string
	// History reads the stored promotions and demotions for /v1/history;
	// nil: the route answers 501.
	History History
	// Webhooks keeps the webhook subscriptions (admin calls only); nil:
	// the routes answer 501.
	Webhooks Webhooks
	// Gatherer serves /metrics; nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger // nil discards
}

// Aggregators answers for every aggregator shard (shardclient.Client, whose
// errors name the shards that did not answer).
type Aggregators interface {
	Top(ctx context.Context, app string, n int) ([]shardapi.KeyState, error)
	Key(ctx context.Context, app, key string) (shardapi.KeyState, bool, error)
	// Effects returns the effect of every key of app ("": every app) that
	// has any, from every shard.
	Effects(ctx context.Context, app string) ([]shardapi.KeyEffectRates, error)
	// Instances returns the effect of every instance of app ("": every
	// app) that has any, summed over its keys, from every shard.
	Instances(ctx context.Context, app string) ([]shardapi.InstanceEffectRates, error)
}

type server struct {
	cfg Config
	log *slog.Logger
	eff effectCache
}

// New returns the API's handler. Routes (docs/shardapi.md):
//
//	GET /v1/hotkeys[?app=]      the published hot keys, by rate descending, with the share of their reads served from L1
//	GET /v1/hotkeys/{key}?app=  one key: hot or not, its current rate, its busiest sources and its effect
//	GET /v1/top?app=&n=         the busiest keys, hot or not
//	GET /v1/instances[?app=]    each app instance's reads of hot keys: from L1, from Redis, limited
//	GET /v1/events[?app=&n=]    recent promotions and demotions, newest first
//	GET /v1/history?app=[&key=&since=&until=&limit=]  stored promotions and demotions, newest first
//	GET /v1/webhooks?app=, PUT and DELETE /v1/webhooks/{name}?app=  webhook subscriptions (admin calls)
//	GET /v1/pins?app=, PUT and DELETE /v1/pins/{key}?app=      operator pins (writes need the admin token)
//	GET /v1/blocks?app=, PUT and DELETE /v1/blocks/{key}?app=  operator blocks (likewise)
//	GET, PUT and DELETE /v1/rules?app=  an app's rule list (writes need the admin token)
//	GET /v1/config              the threshold, for the page, and the consumed topic
//	GET /                       the live page (assets under /ui/)
//	GET /metrics, /healthz, /readyz
func New(cfg Config) (http.Handler, error) {
	if cfg.HotSet == nil || cfg.Aggregators == nil {
		return nil, errors.New("httpapi: HotSet and Aggregators are required")
	}
	a := &server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
	g := cmp.Or[prometheus.Gatherer](cfg.Gatherer, prometheus.DefaultGatherer)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+hotspotapi.PathHotKeys, a.hotkeys)
	mux.HandleFunc("GET "+hotspotapi.PathHotKeys+"/{key}", a.key)
	mux.HandleFunc("GET "+hotspotapi.PathTop, a.top)
	mux.HandleFunc("GET "+hotspotapi.PathInstances, a.instances)
	mux.HandleFunc("GET "+hotspotapi.PathEvents, a.events)
	mux.HandleFunc("GET "+hotspotapi.PathHistory, a.history)
	mux.HandleFunc("GET "+hotspotapi.PathWebhooks, a.listWebhooks)
	mux.HandleFunc("PUT "+hotspotapi.PathWebhooks+"/{name}", a.putWebhook)
	mux.HandleFunc("DELETE "+hotspotapi.PathWebhooks+"/{name}", a.deleteWebhook)
	for _, l := range []hotspotapi.List{hotspotapi.Pins, hotspotapi.Blocks} {
		kind := string(l)
		mux.HandleFunc("GET /v1/"+kind, a.listKeys(kind))
		mux.HandleFunc("PUT /v1/"+kind+"/{key}", a.admin(kind, true))
		mux.HandleFunc("DELETE /v1/"+kind+"/{key}", a.admin(kind, false))
	}
	mux.HandleFunc("GET "+hotspotapi.PathRules, a.getRules)
	mux.HandleFunc("PUT "+hotspotapi.PathRules, a.putRules)
	mux.HandleFunc("DELETE "+hotspotapi.PathRules, a.deleteRules)
	mux.HandleFunc("GET "+hotspotapi.PathConfig, func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Indent(w, http.StatusOK, hotspotapi.Config{Threshold: cfg.Threshold, Topic: cfg.Topic})
	})
	ui, _ := fs.Sub(pageFS, "page") // the folder is embedded below
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(ui)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, ui, "index.html")
	})
	mux.Handle("GET "+hotspotapi.PathMetrics, promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Indent(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	return mux, nil
}

//go:embed page
var pageFS embed.FS

func (a *server) hotkeys(w http.ResponseWriter, r *http.Request) {
	snap := a.cfg.HotSet()
	q := r.URL.Query()
	if !q.Has("app") {
		apps := []hotspotapi.AppHotKeys{}
		for _, app := range snap.Apps() {
			apps = append(apps, appHotKeys(snap, app))
		}
		a.servedL1(r.Context(), "", apps)
		httpjson.Indent(w, http.StatusOK, hotspotapi.AllHotKeys{Apps: apps})
		return
	}
	app, err := appParam(q)
	if err != nil {
		badRequest(w, err)
		return
	}
	out := []hotspotapi.AppHotKeys{appHotKeys(snap, app)}
	a.servedL1(r.Context(), app, out)
	httpjson.Indent(w, http.StatusOK, out[0])
}

func appHotKeys(snap *hotwatch.Snapshot, app string) hotspotapi.AppHotKeys {
	keys := snap.App(app)
	out := hotspotapi.AppHotKeys{App: app, HotKeys: make([]hotspotapi.HotKey, 0, len(keys))}
	for _, k := range keys {
		out.HotKeys = append(out.HotKeys, hotspotapi.HotKey{Key: k.Key, Rate: k.Rate, Since: rfc3339(k.Since), Source: source(k),
			Rule: k.Rule, Kind: kind(k)})
	}
	return out
}

func (a *server) key(w http.ResponseWriter, r *http.Request) {
	app, key, err := appAndKey(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	st := hotspotapi.KeyStatus{App: app, Key: key}
	if k, ok := a.cfg.HotSet().Key(app, key); ok {
		st.Hot, st.Rate, st.Since, st.Source = true, k.Rate, rfc3339(k.Since), source(k)
		st.Rule, st.Kind = k.Rule, kind(k)
	}
	// The owner's rate is current (the published one is as of the last
	// publication); only the owner tracks the key, the others answer 404.
	ks, found, err := a.cfg.Aggregators.Key(r.Context(), app, key)
	if found {
		st.Rate = ks.Rate
		st.Sources, st.DistinctSources, st.Effect = sourceShares(ks.Sources), ks.DistinctSources, effectRates(ks.Effect)
	} else if err != nil {
		a.log.Warn("no current rate", "app", app, "key", key, "err", err)
	}
	httpjson.Indent(w, http.StatusOK, st)
}

func (a *server) top(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	app, err := appParam(q)
	if err != nil {
		badRequest(w, err)
		return
	}
	n := hotspotapi.DefaultTopN
	if s := q.Get("n"); s != "" {
		n, err = strconv.Atoi(s)
		if err != nil || n < 1 || n > hotspotapi.MaxTopN {
			badRequest(w, fmt.Errorf("n must be an integer from 1 to %d, got %q", hotspotapi.MaxTopN, s))
			return
		}
	}
	keys, err := a.cfg.Aggregators.Top(r.Context(), app, n)
	if err != nil {
		if errors.Is(err, shardapi.ErrNoAnswer) {
			httpjson.Indent(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		a.log.Warn("busiest keys of some aggregators missing", "app", app, "err", err)
	}
	out := hotspotapi.Top{App: app, Keys: make([]hotspotapi.TopKey, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, hotspotapi.TopKey{Key: k.Key, Rate: k.Rate, Hot: k.Hot})
	}
	httpjson.Indent(w, http.StatusOK, out)
}

func (a *server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := hotspotapi.DefaultEventsN
	if s := q.Get("n"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > hotspotapi.MaxTopN {
			badRequest(w, fmt.Errorf("n must be an integer from 1 to %d, got %q", hotspotapi.MaxTopN, s))
			return
		}
	}
	out := hotspotapi.Events{Events: []hotspotapi.Event{}}
	if a.cfg.Events != nil {
		out.Events = a.cfg.Events.Recent(q.Get("app"), n)
	}
	httpjson.Indent(w, http.StatusOK, out)
}

// Lists keeps the operators' pins and blocks (internal/pinstore); kind is
// "pins" or "blocks".
type Lists interface {
	List(ctx context.Context, kind, app string) ([]string, error)
	Add(ctx context.Context, kind, app, key string) error
	Remove(ctx context.Context, kind, app, key string) error
}

func (a *server) listKeys(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		app, err := appParam(r.URL.Query())
		if err != nil {
			badRequest(w, err)
			return
		}
		if a.cfg.Lists == nil {
			httpjson.Indent(w, http.StatusNotImplemented, map[string]string{"error": kind + " are not kept by this process"})
			return
		}
		keys, err := a.cfg.Lists.List(r.Context(), kind, app)
		if err != nil {
			a.log.Error("reading "+kind, "app", app, "err", err)
			httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		httpjson.Indent(w, http.StatusOK, hotspotapi.Keys{App: app, Keys: append([]string{}, keys...)})
	}
}

// admin adds (put) or removes key from app's pins or blocks.
func (a *server) admin(kind string, put bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r) {
			return
		}
		app, key, err := appAndKey(r)
		if err != nil {
			badRequest(w, err)
			return
		}
		if a.cfg.Lists == nil {
			httpjson.Indent(w, http.StatusNotImplemented, map[string]string{"error": kind + " are not kept by this process"})
			return
		}
		op := a.cfg.Lists.Remove
		if put {
			op = a.cfg.Lists.Add
		}
		if err := op(r.Context(), kind, app, key); err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, pinstore.ErrTooMany) {
				status = http.StatusConflict
			} else {
				a.log.Error("changing "+kind, "app", app, "key", key, "err", err)
			}
			httpjson.Indent(w, status, map[string]string{"error": err.Error()})
			return
		}
		a.log.Info("operator changed "+kind, "app", app, "key", key, "added", put)
		w.WriteHeader(http.StatusNoContent)
	}
}

// authorized checks the admin token of r; when it is missing or wrong it
// answers w and returns false.
func (a *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	switch auth := r.Header.Get("Authorization"); {
	case a.cfg.AdminToken == "":
		httpjson.Indent(w, http.StatusForbidden, map[string]string{"error": "admin calls are disabled: start hotspotd with --admin-token"})
		return false
	case !strings.HasPrefix(auth, "Bearer ") ||
		subtle.ConstantTimeCompare([]byte(strings.TrimPrefix(auth, "Bearer ")), []byte(a.cfg.AdminToken)) != 1:
		w.Header().Set("WWW-Authenticate", `Bearer realm="hotspot"`)
		httpjson.Indent(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong admin token (Authorization: Bearer TOKEN)"})
		return false
	}
	return true
}

func (a *server) readyz(w http.ResponseWriter, _ *http.Request) {
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(); err != nil {
			httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": err.Error()})
			return
		}
	}
	httpjson.Indent(w, http.StatusOK, map[string]string{"status": "ready"})
}

func appParam(q url.Values) (string, error) {
	if !q.Has("app") {
		return "", errors.New("app is required")
	}
	app := q.Get("app")
	if app == "" || len(app) > wire.DefaultMaxKeyLen {
		return "", fmt.Errorf("app must be 1 to %d bytes", wire.DefaultMaxKeyLen)
	}
	return app, nil
}

// appAndKey reads the {key} path value and the app parameter.
func appAndKey(r *http.Request) (app, key string, err error) {
	key = r.PathValue("key")
	if key == "" || len(key) > wire.DefaultMaxKeyLen {
		return "", "", fmt.Errorf("key must be 1 to %d bytes", wire.DefaultMaxKeyLen)
	}
	app, err = appParam(r.URL.Query())
	return app, key, err
}

func source(k hotset.Key) string { return cmp.Or(k.Source, "detected") }

// kind is k's kind as the API shows it: "count" when the shard left it out.
func kind(k hotset.Key) string { return cmp.Or(k.Kind, string(rules.KindCount)) }

func rfc3339(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// sourceShares is the API's copy of an aggregator's sources.
func sourceShares(in []shardapi.SourceShare) []hotspotapi.SourceShare {
	if in == nil {
		return nil
	}
	out := make([]hotspotapi.SourceShare, len(in))
	for i, s := range in {
		out[i] = hotspotapi.SourceShare(s)
	}
	return out
}

// effectRates is the API's copy of an aggregator's effect.
func effectRates(e *shardapi.EffectRates) *hotspotapi.EffectRates {
	if e == nil {
		return nil
	}
	r := hotspotapi.EffectRates(*e)
	return &r
}

func badRequest(w http.ResponseWriter, err error) {
	httpjson.Indent(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
}
