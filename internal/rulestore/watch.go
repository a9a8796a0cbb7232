package rulestore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

// WatchConfig configures a Watcher. A zero field means the default.
type WatchConfig struct {
	Root       string                // "" means hotset.DefaultRoot
	Default    rules.Effective       // the default rule every Set is compiled against; required (Threshold > 0)
	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: not exported
}

// Watcher follows every app's rule list and calls its callback with the
// app's compiled Set after each change.
type Watcher struct {
	s     *zkgroup.Session
	cfg   WatchConfig
	fn    func(app string, s *rules.Set)
	log   *slog.Logger
	ready chan struct{} // closed after the first full read
	once  sync.Once
	m     watchMetrics

	mu   sync.Mutex // guards sets
	sets map[string]*rules.Set

	// Owned by Run's goroutine (the callback of zkgroup.Session.Watch).
	data map[string][]byte // node name -> the bytes last decoded (good or bad)
}

type watchMetrics struct {
	updates, bad prometheus.Counter
	apps         prometheus.Gauge
}

// NewWatcher returns a Watcher over s that calls fn(app, set) for every
// change of an app's rules: a new or rewritten list, compiled against
// cfg.Default, or a deleted one, as an empty Set (every key follows the
// default). fn runs on Run's goroutine, one call at a time.
func NewWatcher(s *zkgroup.Session, cfg WatchConfig, fn func(app string, s *rules.Set)) (*Watcher, error) {
	if cfg.Default.Threshold <= 0 || cfg.Default.Window <= 0 {
		return nil, errors.New("rulestore: the default rule needs a threshold and a window above 0")
	}
	if fn == nil {
		fn = func(string, *rules.Set) {}
	}
	cfg.Root = cmp.Or(cfg.Root, hotset.DefaultRoot)
	f := promauto.With(cfg.Registerer)
	return &Watcher{
		s: s, cfg: cfg, fn: fn,
		log:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		ready: make(chan struct{}),
		sets:  map[string]*rules.Set{},
		data:  map[string][]byte{},
		m: watchMetrics{
			updates: f.NewCounter(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "rules",
				Name: "updates_total", Help: "Changes of an app's rules applied (new, rewritten or deleted lists)."}),
			bad: f.NewCounter(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "rules",
				Name: "bad_nodes_total", Help: "Rule nodes that failed to decode; the app kept its last good rules."}),
			apps: f.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "rules",
				Name: "apps", Help: "Apps with a rule list in effect."}),
		},
	}, nil
}

// Ready is closed once Run has read every app's rules the first time (and
// called fn for each).
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Set returns app's rules in effect: the default alone when it has none.
func (w *Watcher) Set(app string) *rules.Set {
	w.mu.Lock()
	s := w.sets[app]
	w.mu.Unlock()
	if s == nil {
		s, _ = rules.Compile(nil, w.cfg.Default)
	}
	return s
}

// Run watches the rules until ctx ends; then it returns nil. It returns an
// error only when watching cannot go on (a closed session, no permission).
func (w *Watcher) Run(ctx context.Context) error {
	err := w.s.Watch(ctx, hotset.RulesDir(w.cfg.Root), w.apply)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("rulestore: %w", err)
}

// apply diffs the nodes against what was last seen and reports each change.
func (w *Watcher) apply(nodes map[string][]byte) {
	defer w.once.Do(func() { close(w.ready) })
	for name := range w.data {
		if _, ok := nodes[name]; ok {
			continue
		}
		delete(w.data, name)
		app, err := hotset.Unescape(name)
		if err != nil {
			continue // never applied
		}
		w.mu.Lock()
		_, had := w.sets[app]
		delete(w.sets, app)
		w.m.apps.Set(float64(len(w.sets)))
		w.mu.Unlock()
		if had {
			w.log.Info("rules deleted; the app follows the default rule", "app", app)
			w.m.updates.Inc()
			w.fn(app, w.Set(app))
		}
	}
	for name, data := range nodes {
		if old, ok := w.data[name]; ok && bytes.Equal(old, data) {
			continue
		}
		w.data[name] = data
		app, set, err := w.decode(name, data)
		if err != nil {
			w.m.bad.Inc()
			w.log.Error("bad rules node; the app keeps its last good rules", "node", name, "err", err)
			continue
		}
		w.mu.Lock()
		w.sets[app] = set
		w.m.apps.Set(float64(len(w.sets)))
		w.mu.Unlock()
		w.log.Info("rules changed", "app", app, "rules", set.Len())
		w.m.updates.Inc()
		w.fn(app, set)
	}
}

func (w *Watcher) decode(name string, data []byte) (string, *rules.Set, error) {
	app, err := hotset.Unescape(name)
	if err != nil {
		return "", nil, err
	}
	l, err := rules.DecodeNode(data)
	if err != nil {
		return app, nil, err
	}
	if l.App != app {
		return app, nil, fmt.Errorf("the node of app %q holds the list of app %q", app, l.App)
	}
	set, err := rules.Compile(l, w.cfg.Default)
	return app, set, err
}
