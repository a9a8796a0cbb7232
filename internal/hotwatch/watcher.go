package hotwatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/hotspot-dev/hotspot/hotset"
)

// Config tunes a Watcher. A zero field means the default.
type Config struct {
	Root string // ZooKeeper root; "" means hotset.DefaultRoot
	App  string // the app to follow; "" follows every app under <root>/hot

	// OnChange, if set, is called after every change of an app's set of hot
	// keys or of a hot key's rule or kind (not for a mere rate update), from
	// the watcher's goroutine, in order. It must not block for long: the
	// next ZooKeeper event waits.
	OnChange func(Change)

	// MaxStale bounds how long the hot set is kept while the ZooKeeper
	// connection is down (0 means 5 minutes). Meanwhile no shard expires:
	// the aggregators cannot renew their nodes either, and dropping every
	// hot key at once would send all of their traffic to the backing store.
	// The watcher notices a disconnection within 250ms; MaxStale after
	// that, the TTLs apply again. After a reconnect every TTL runs from the
	// reconnect. A freeze of this process (SIGSTOP) is not an outage: on
	// resume the TTLs apply at once.
	MaxStale time.Duration

	// WholeNodes reads every shard node whole at each write, as readers
	// before the part nodes did, instead of following a shard through its
	// part nodes when it has them (docs/zookeeper.md, "Part nodes"). It
	// costs each watcher the whole node per write (87 KB at 1,000 keys
	// instead of about 5.5 KB) and saves the 17 watches per shard of its
	// parts: for a process that follows many apps but few changes.
	WholeNodes bool

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: not exported
}

// Change is one app's hot keys that appeared, disappeared or changed their
// reason (rule or kind) in one step.
type Change struct {
	App     string
	Added   []hotset.Key // keys that turned hot, merged over shards
	Removed []string     // keys that are no longer hot
	Changed []hotset.Key // keys still hot whose merged rule or kind changed
	// At is when the ZooKeeper event behind the change arrived in this
	// process (for a TTL expiry: when the timer fired). Promotion delays
	// are measured from it.
	At       time.Time
	Snapshot *Snapshot // the snapshot that includes the change
}

// watchFunc calls fn with every child node of dir and its data, at first and
// after every change, until ctx ends; the children for which read returns
// false (read nil: none) are listed with nil data, and writes to them are
// not changes. It is internal/zkgroup's WatchSome bound to a session; tests
// give a fake.
type watchFunc func(ctx context.Context, dir string, read func(name string) bool, fn func(map[string][]byte)) error

// Watcher follows the published hot set. Create one with New, start Run, and
// read Snapshot from any goroutine.
type Watcher struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics
	watch watchFunc
	now   func() time.Time
	// connected reports whether the ZooKeeper connection has a session.
	connected func() bool

	snap    atomic.Pointer[Snapshot]
	ready   chan struct{}
	running atomic.Bool
	// beat is when Run's loop last went round (Unix ns; 0 when not
	// running): it goes round at least every beatEvery.
	beat atomic.Int64
}

type metrics struct {
	events, changes, invalid, expired prometheus.Counter
	keys                              prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "hotwatch", Name: name, Help: help})
	}
	return &metrics{
		events:  c("events_total", "Reads of an app's shard nodes after a ZooKeeper event."),
		changes: c("changes_total", "Changes of an app's set of hot keys."),
		invalid: c("invalid_shards_total", "Shard nodes ignored because they did not decode or had no TTL."),
		expired: c("expired_shards_total", "Shard nodes dropped or ignored because their TTL had passed."),
		keys: f.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "hotwatch", Name: "keys",
			Help: "Hot keys currently followed, summed over apps."}),
	}
}

func newWatcher(watch watchFunc, cfg Config) *Watcher {
	cfg.Root = cmp.Or(cfg.Root, hotset.DefaultRoot)
	cfg.MaxStale = cmp.Or(cfg.MaxStale, DefaultMaxStale)
	w := &Watcher{
		cfg:       cfg,
		log:       cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		m:         newMetrics(cfg.Registerer),
		watch:     watch,
		now:       time.Now,
		connected: func() bool { return true },
		ready:     make(chan struct{}),
	}
	w.snap.Store(empty)
	return w
}

// DefaultMaxStale is the default of Config.MaxStale: the longest a reader
// keeps a hot set it cannot confirm with ZooKeeper.
const DefaultMaxStale = 5 * time.Minute

// beatEvery is the longest Run's loop stays idle; freezeGap is the gap
// between two rounds that tells this process was frozen (SIGSTOP, a paused
// VM) rather than ZooKeeper away.
const (
	beatEvery = 250 * time.Millisecond
	freezeGap = time.Second
)

// freezeWait bounds how long Snapshot waits for the loop after a freeze: on
// a resumed process the loop runs within it, and a merely busy one does not
// stall its readers for longer.
const freezeWait = 50 * time.Millisecond

// Snapshot returns the current hot set and never returns nil. It does not
// block, except right after this process was frozen (its loop has not gone
// round for freezeGap): then it waits, at most freezeWait, for the loop to
// expire what the freeze made stale, so that a resumed process does not
// serve a hot set older than its TTLs.
func (w *Watcher) Snapshot() *Snapshot {
	if b := w.beat.Load(); b != 0 && time.Since(time.Unix(0, b)) > freezeGap {
		deadline := time.Now().Add(freezeWait)
		for w.beat.Load() == b && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	return w.snap.Load()
}

// Ready is closed once the hot set has been read in full for the first time.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// event is one full read of a directory, sent by a watch goroutine to Run.
type event struct {
	app   string // the app whose shards were read; "" for the list of apps
	gen   uint64 // the watch that sent it; stale ones are ignored
	nodes map[string][]byte
	at    time.Time
	err   error // the watch ended with this error
}

// appWatch is what follows one app: a watch of its folder of shard nodes
// (hot), which reads the operators' nodes and the shards not followed
// through parts; a watch of its folder of part folders (list), names only;
// and a watch of each shard's part folder. A shard whose part folder holds
// a valid lease is followed through its parts (a change costs one small
// read); hot is restarted, without reading its node, whenever that set of
// shards changes.
type appWatch struct {
	state appState
	hot   dirWatch
	list  dirWatch
	parts map[string]*dirWatch // by escaped shard name
	// leased are the shards followed through their parts; hot's watch
	// reads the others (hotLeased: the set it was started with).
	leased, hotLeased map[string]bool
}

// dirWatch is one running watch and its last read.
type dirWatch struct {
	gen    uint64
	cancel context.CancelFunc
	nodes  map[string][]byte
	seen   bool // delivered its first read
}

// Run follows the hot set until ctx is canceled, then returns nil after its
// goroutines have exited. It returns an error if a ZooKeeper watch fails for
// good; it may then be called again, and it keeps the published Snapshot
// until the first read of the new run replaces it. Runs must not overlap.
func (w *Watcher) Run(ctx context.Context) error {
	if w.running.Swap(true) {
		return errors.New("hotwatch: Run is already running")
	}
	defer w.running.Store(false)
	defer w.beat.Store(0)
	ctx, cancel := context.WithCancel(ctx)
	r := &run{w: w, ctx: ctx, events: make(chan event, 16), apps: map[string]*appWatch{}}
	defer func() { cancel(); r.wg.Wait() }()

	r.listed = w.cfg.App != ""
	if r.listed {
		r.follow(w.cfg.App)
	} else {
		r.watch(hotset.HotDir(w.cfg.Root), "", 0, nil)
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	beat := time.NewTicker(beatEvery)
	defer beat.Stop()
	w.beat.Store(w.now().UnixNano())
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.events:
			if err := r.handle(ev); err != nil {
				return err
			}
		case <-timer.C:
		case <-beat.C:
		}
		now := w.now()
		r.expire(now)
		w.beat.Store(now.UnixNano())
		w.markReady(r.listed, r.apps)
		w.arm(timer, r.apps)
	}
}

// run is the state of one call of Run, kept by Run's goroutine. The watch
// goroutines use only w, ctx and events, which never change, and wg.
type run struct {
	w      *Watcher
	ctx    context.Context // Run's: canceled when it returns, which ends every watch
	wg     sync.WaitGroup  // the watch goroutines
	events chan event      // the watches' reads and failures
	apps   map[string]*appWatch
	gen    uint64    // the last app watch's generation
	listed bool      // the apps to follow are known: Config.App, or the list read once
	down   time.Time // when the connection was found down; zero while up
}

// watch starts a goroutine that sends every read of dir to r.events as app's,
// of watch generation gen, and the watch's error if it fails for good. The
// returned function ends it.
func (r *run) watch(dir, app string, gen uint64, read func(string) bool) context.CancelFunc {
	wctx, wcancel := context.WithCancel(r.ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.w.watch(wctx, dir, read, func(nodes map[string][]byte) {
			ev := event{app: app, gen: gen, nodes: maps.Clone(nodes), at: r.w.now()}
			select {
			case r.events <- ev:
			case <-wctx.Done():
			}
		})
		if err != nil && wctx.Err() == nil {
			select {
			case r.events <- event{app: app, gen: gen, err: err}:
			case <-wctx.Done():
			}
		}
	}()
	return wcancel
}

// follow starts watching app's shards.
func (r *run) follow(app string) {
	aw := &appWatch{parts: map[string]*dirWatch{}, leased: map[string]bool{}}
	r.apps[app] = aw
	if r.w.cfg.WholeNodes {
		aw.list.seen = true // no part folders followed
		r.restartHot(app, aw)
		return
	}
	// The shard nodes are watched once the parts have been read (see
	// updateLeases), so that a shard followed through its parts is not
	// read whole first.
	r.start(&aw.list, hotset.PartsAppDir(r.w.cfg.Root, app), app, func(string) bool { return false })
}

// start starts the watch of dir into d, in a new generation.
func (r *run) start(d *dirWatch, dir, app string, read func(string) bool) {
	r.gen++
	d.gen, d.seen = r.gen, false
	d.cancel = r.watch(dir, app, r.gen, read)
}

// restartHot (re)starts the watch of app's shard nodes, reading those not
// in aw.leased. The last read of the previous watch stays until the new
// one delivers.
func (r *run) restartHot(app string, aw *appWatch) {
	if aw.hot.cancel != nil {
		aw.hot.cancel()
	}
	leased := maps.Clone(aw.leased)
	aw.hotLeased = leased
	seen := aw.hot.seen
	r.start(&aw.hot, hotset.AppDir(r.w.cfg.Root, app), app, func(name string) bool { return !leased[name] })
	aw.hot.seen = seen // Ready needs a first read, not a read since the restart
}

// stop ends every watch of aw.
func (aw *appWatch) stop() {
	for _, d := range aw.all() {
		if d.cancel != nil {
			d.cancel()
		}
	}
}

// seen reports whether every watch of aw delivered its first read.
func (aw *appWatch) seen() bool {
	return aw.hot.seen && aw.partsSeen()
}

// partsSeen reports whether the list of part folders and each of them have
// been read.
func (aw *appWatch) partsSeen() bool {
	if !aw.list.seen {
		return false
	}
	for _, d := range aw.parts {
		if !d.seen {
			return false
		}
	}
	return true
}

func (aw *appWatch) all() []*dirWatch {
	out := []*dirWatch{&aw.hot, &aw.list}
	for _, d := range aw.parts {
		out = append(out, d)
	}
	return out
}

// handle applies one read of a watch: the list of apps, or an app's shards
// (unless a later watch of the app replaced the one that read them). It
// returns the error of a watch that failed for good.
func (r *run) handle(ev event) error {
	if ev.err != nil {
		what := "the list of apps"
		if ev.app != "" {
			what = "app " + ev.app
		}
		return fmt.Errorf("hotwatch: watching %s: %w", what, ev.err)
	}
	if ev.app == "" && r.w.cfg.App == "" {
		r.listed = true
		r.w.applyList(ev, r.apps, r.follow)
		return nil
	}
	aw := r.apps[ev.app]
	if aw == nil {
		return nil
	}
	switch {
	case ev.gen == aw.hot.gen:
		aw.hot.nodes, aw.hot.seen = ev.nodes, true
	case ev.gen == aw.list.gen:
		aw.list.nodes, aw.list.seen = ev.nodes, true
		r.followParts(ev.app, aw)
	default:
		d := r.partsOf(aw, ev.gen)
		if d == nil {
			return nil // a stale watch
		}
		d.nodes, d.seen = ev.nodes, true
	}
	r.w.m.events.Inc()
	r.updateLeases(ev.app, aw)
	parts := map[string]map[string][]byte{}
	for name := range aw.leased {
		parts[name] = aw.parts[name].nodes
	}
	if aw.state.update(aw.hot.nodes, parts, ev.at, r.w.log, r.w.m) {
		r.w.publish(ev.app, aw.state.merged(), ev.at)
	}
	return nil
}

// partsOf returns aw's watch of a shard's parts of generation gen, or nil.
func (r *run) partsOf(aw *appWatch, gen uint64) *dirWatch {
	for _, d := range aw.parts {
		if d.gen == gen {
			return d
		}
	}
	return nil
}

// followParts starts watching the part folders that appeared in app's list
// and ends the watches of those that went.
func (r *run) followParts(app string, aw *appWatch) {
	for name := range aw.list.nodes {
		if aw.parts[name] == nil {
			d := &dirWatch{}
			aw.parts[name] = d
			shard, err := hotset.Unescape(name)
			if err != nil {
				r.w.log.Warn("hotwatch: ignoring part folder", "node", name, "err", err)
				d.seen = true
				continue
			}
			r.start(d, hotset.PartsShardDir(r.w.cfg.Root, app, shard), app, nil)
		}
	}
	for name, d := range aw.parts {
		if _, ok := aw.list.nodes[name]; !ok {
			if d.cancel != nil {
				d.cancel()
			}
			delete(aw.parts, name)
		}
	}
}

// updateLeases sets aw.leased to the shards whose part folder holds a valid
// lease and all the parts it names, and (re)starts the watch of the shard
// nodes, once every part folder has been read, if it has not started or
// that changed which of them it must read.
func (r *run) updateLeases(app string, aw *appWatch) {
	leased := map[string]bool{}
	for name, d := range aw.parts {
		if data, ok := d.nodes[hotset.LeaseNode]; ok {
			l, err := hotset.DecodeLease(data)
			if err != nil {
				r.w.m.invalid.Inc()
				r.w.log.Warn("hotwatch: ignoring a lease; reading the shard node", "shard", name, "err", err)
				continue
			}
			complete := true
			for i := range l.Parts {
				if _, ok := d.nodes[hotset.PartName(i)]; !ok {
					complete = false
				}
			}
			leased[name] = complete
		}
	}
	maps.DeleteFunc(leased, func(_ string, ok bool) bool { return !ok })
	aw.leased = leased
	if aw.partsSeen() && (aw.hot.cancel == nil || !maps.Equal(leased, aw.hotLeased)) {
		r.restartHot(app, aw)
	}
}

// expire drops the shards whose TTL has passed at now, and publishes what
// that changes, unless ZooKeeper has been away for less than MaxStale. After
// a freeze of this process the TTLs apply at once.
func (r *run) expire(now time.Time) {
	w := r.w
	frozen := now.Sub(time.Unix(0, w.beat.Load())) > freezeGap
	if frozen {
		// This process stood still, not ZooKeeper: the TTLs apply
		// (what they cover went stale while it stood still), and the
		// connection, lost to the freeze, is not an outage.
		w.log.Warn("hotwatch: this process was frozen; expiring by TTL", "for", now.Sub(time.Unix(0, w.beat.Load())).Round(time.Millisecond))
		r.down = time.Time{}
	}
	if !frozen && !r.checkConn(now) {
		return
	}
	for app, aw := range r.apps {
		if n := aw.state.expire(now); n > 0 {
			w.m.expired.Add(float64(n))
			w.publish(app, aw.state.merged(), now)
		}
	}
}

// checkConn notices a disconnection and a reconnect, and reports whether
// shards may expire now.
func (r *run) checkConn(now time.Time) bool {
	w := r.w
	if !w.connected() {
		if r.down.IsZero() {
			r.down = now
			w.log.Warn("hotwatch: ZooKeeper connection lost; keeping the hot set", "max_stale", w.cfg.MaxStale)
		}
		return now.Sub(r.down) >= w.cfg.MaxStale
	}
	if !r.down.IsZero() {
		w.log.Info("hotwatch: ZooKeeper connection back; TTLs run from now", "down", now.Sub(r.down).Round(time.Millisecond))
		r.down = time.Time{}
		for _, aw := range r.apps {
			aw.state.restart(now)
		}
	}
	return true
}

// applyList starts watching apps that appeared under <root>/hot and forgets
// those that disappeared.
func (w *Watcher) applyList(ev event, apps map[string]*appWatch, follow func(string)) {
	present := map[string]bool{}
	for name := range ev.nodes {
		app, err := hotset.Unescape(name)
		if err != nil {
			w.log.Warn("hotwatch: ignoring app node", "node", name, "err", err)
			continue
		}
		present[app] = true
		if apps[app] == nil {
			follow(app)
		}
	}
	for app, aw := range apps {
		if !present[app] {
			aw.stop()
			delete(apps, app)
			w.publish(app, nil, ev.at)
		}
	}
	for app := range w.snap.Load().apps {
		if !present[app] { // left over from an earlier Run
			w.publish(app, nil, ev.at)
		}
	}
}

// publish makes m app's hot keys and tells OnChange what changed.
func (w *Watcher) publish(app string, m map[string]hotset.Key, at time.Time) {
	prev := w.snap.Load()
	next := prev.with(app, m)
	w.snap.Store(next)
	total := 0
	for _, km := range next.apps {
		total += len(km)
	}
	w.m.keys.Set(float64(total))
	added, removed, changed := diff(prev.apps[app], m)
	if len(added) == 0 && len(removed) == 0 && len(changed) == 0 {
		return
	}
	w.m.changes.Inc()
	if w.cfg.OnChange != nil {
		w.cfg.OnChange(Change{App: app, Added: added, Removed: removed, Changed: changed, At: at, Snapshot: next})
	}
}

func (w *Watcher) markReady(listed bool, apps map[string]*appWatch) {
	select {
	case <-w.ready:
		return
	default:
	}
	if !listed {
		return
	}
	for _, aw := range apps {
		if !aw.seen() {
			return
		}
	}
	close(w.ready)
}

// arm sets timer to the earliest shard expiry still to come, or stops it.
// An expiry already past is one kept through a ZooKeeper outage: the beat
// checks it again.
func (w *Watcher) arm(timer *time.Timer, apps map[string]*appWatch) {
	var next time.Time
	for _, aw := range apps {
		if e := aw.state.nextExpiry(); !e.IsZero() && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	if d := next.Sub(w.now()); next.IsZero() || d <= 0 {
		timer.Stop()
	} else {
		timer.Reset(d)
	}
}
