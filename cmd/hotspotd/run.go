package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/detector"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/pinstore"
	"github.com/hotspot-dev/hotspot/internal/recording"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/shardclient"
	"github.com/hotspot-dev/hotspot/internal/webhook"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/internal/zkpublish"
	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// The adapters this process wires into the services.
var (
	_ detector.Source        = (*kafkaio.Source)(nil)
	_ detector.Sink          = (*shardclient.Client)(nil)
	_ detector.Membership    = (*zkgroup.Session)(nil)
	_ shardclient.Membership = (*zkgroup.Session)(nil)
	_ aggregator.Publisher   = (*zkpublish.Publisher)(nil)
	_ aggregator.Peers       = (*shardclient.Client)(nil)
	_ aggregator.Recorder    = (*history.Store)(nil)
	_ aggregator.Recorder    = (*webhook.Dispatcher)(nil)
	_ aggregator.Recorder    = (*recording.Recording)(nil)
	_ httpapi.Aggregators    = (*shardclient.Client)(nil)
	_ httpapi.Lists          = (*pinstore.Store)(nil)
	_ httpapi.Rules          = (*rulestore.Store)(nil)
)

// parts are one hotspotd's parts, wired; nil roles are off.
type parts struct {
	cfg     config
	log     *slog.Logger
	reg     *prometheus.Registry
	sess    *zkgroup.Session
	aggs    *shardclient.Client // the aggregator shards: the detector's Sink and the API's source
	watcher *hotwatch.Watcher   // the published hot set
	events  *httpapi.Events     // its recent changes
	agg     *aggregator.Aggregator
	det     *detector.Detector
	rules   *rulestore.Watcher              // every app's rules, handed to ruleSinks
	guard   func(http.Handler) http.Handler // checks the cluster's signatures on the internal routes
	rec     *recording.Recording            // the history and the webhooks
}

// run serves until ctx is canceled, then shuts down in dependency order: the
// detector stops and hands its last counts to the aggregators (which are
// still serving), then the aggregator publishes its final hot set and leaves
// ZooKeeper, then the HTTP server closes.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	p := &parts{cfg: cfg, log: log, reg: newRegistry()}
	var err error
	if p.sess, err = connectZK(ctx, cfg, log, p.reg); err != nil {
		return err
	}
	defer p.sess.Close()
	defer func() {
		if p.aggs != nil {
			p.aggs.Close()
		}
	}()
	if p.rec, err = newRecording(ctx, cfg, p.sess, log, p.reg); err != nil {
		return err
	}
	defer p.rec.Close() // after the aggregator's last decisions: runRoles has returned
	p.rec.Start()
	if err := build(ctx, p); err != nil {
		return err
	}
	handler, err := newHandler(p)
	if err != nil {
		return err
	}
	srv, addr, served, err := listen(cfg, handler)
	if err != nil {
		return err
	}
	log.Info("hotspotd serving", "http", addr, "id", cfg.id,
		"detector", cfg.detector, "aggregator", cfg.aggregator, "zk", cfg.zk, "root", cfg.zkRoot)
	runErr, srvErr := runRoles(ctx, p, served)
	shutdown(srv, log)
	return errors.Join(runErr, srvErr)
}

// newRegistry returns the process's metrics registry, with Go's and the
// process's collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// connectZK opens the process's one ZooKeeper session, waiting up to 30s.
func connectZK(ctx context.Context, cfg config, log *slog.Logger, reg prometheus.Registerer) (*zkgroup.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := zkgroup.Connect(ctx, cfg.zk, cfg.sec.zkConfig(zkgroup.Config{Logger: log, Registerer: reg}))
	if err != nil {
		return nil, fmt.Errorf("no ZooKeeper session with %v (is ZooKeeper running? `make up` starts one): %w", cfg.zk, err)
	}
	return sess, nil
}

// build makes the aggregator client and hot-set watcher every process has,
// and the roles p.cfg turns on.
func build(ctx context.Context, p *parts) error {
	cfg, log := p.cfg, p.log
	tlsConf, wrap, guard, err := clusterAPI(cfg, log, p.reg)
	if err != nil {
		return err
	}
	p.guard = guard
	acfg := shardclient.Config{Root: cfg.zkRoot, Source: cfg.id, TLS: tlsConf, Wrap: wrap, Logger: log, Registerer: p.reg}
	if cfg.aggregator {
		// The detector hands the counts for this process's own shard over
		// in-process (p.agg exists before the detector sends anything).
		acfg.SelfID = cfg.id
		acfg.Self = func(body []byte) error { return p.agg.TakePartials(body) }
	}
	if p.aggs, err = shardclient.New(acfg); err != nil {
		return err
	}
	p.events = httpapi.NewEvents(500)
	p.watcher, err = hotwatch.New(p.sess, hotwatch.Config{Root: cfg.zkRoot, OnChange: p.events.Record, Logger: log, Registerer: p.reg})
	if err != nil {
		return err
	}
	if cfg.aggregator {
		var rec aggregator.Recorder
		if p.rec.Records() {
			rec = p.rec
		}
		if p.agg, err = newAggregator(cfg, p.sess, p.aggs, rec, log, p.reg); err != nil {
			return err
		}
	}
	if cfg.detector {
		if p.det, err = newDetector(ctx, cfg, p.sess, p.aggs, log, p.reg); err != nil {
			return err
		}
	}
	sinks := ruleSinks(p)
	p.rules, err = rulestore.NewWatcher(p.sess, rulestore.WatchConfig{
		Root: cfg.zkRoot, Default: cfg.defaultRule(), Logger: log, Registerer: p.reg,
	}, func(app string, s *rules.Set) {
		for _, sink := range sinks {
			sink(app, s)
		}
	})
	return err
}

// ruleSinks are the roles that apply an app's rules: each is called, on the
// rules watcher's goroutine, with an app's compiled rules after every change
// (an empty Set once its list is deleted). Each returns once the rules are
// in effect: the aggregator re-resolves the app's tracked keys first, up
// to 0.3 s for 100 000 keys and 100 rules (BENCHMARKS.md U4).
func ruleSinks(p *parts) []func(app string, s *rules.Set) {
	var sinks []func(app string, s *rules.Set)
	if p.agg != nil {
		sinks = append(sinks, p.agg.SetRules)
	}
	if p.det != nil {
		sinks = append(sinks, p.det.SetRules)
	}
	return sinks
}

// newRecording opens the history (with --redis) and the webhooks; an
// aggregator records its decisions to them.
func newRecording(ctx context.Context, cfg config, sess *zkgroup.Session, log *slog.Logger, reg prometheus.Registerer) (*recording.Recording, error) {
	rcfg := recording.Config{
		Root: cfg.zkRoot, HistoryMaxLen: cfg.historyMaxLen, HistoryRetention: cfg.historyRetention,
		Logger: log, Registerer: reg,
	}
	if rcfg.HistoryRetention == 0 {
		rcfg.HistoryRetention = -1 // the flag's 0 keeps events until the length bound
	}
	if cfg.aggregator {
		rcfg.Shard = cfg.id
	}
	if cfg.redis != "" {
		opts := &redis.Options{Addr: cfg.redis}
		if strings.Contains(cfg.redis, "://") {
			var err error
			if opts, err = redis.ParseURL(cfg.redis); err != nil {
				return nil, fmt.Errorf("--redis: %w", err)
			}
		}
		if err := cfg.redisOptions(opts); err != nil {
			return nil, err
		}
		rcfg.Redis = opts
	}
	return recording.New(ctx, sess, rcfg)
}

// newAggregator returns the aggregator role, publishing to ZooKeeper.
func newAggregator(cfg config, sess *zkgroup.Session, peers aggregator.Peers, rec aggregator.Recorder, log *slog.Logger, reg prometheus.Registerer) (*aggregator.Aggregator, error) {
	pub, err := zkpublish.New(sess, zkpublish.Config{Root: cfg.zkRoot, Logger: log})
	if err != nil {
		return nil, err
	}
	return aggregator.New(aggregator.Config{
		ID: cfg.id, Addr: cfg.advertise, Threshold: cfg.threshold, Window: cfg.window,
		LowMark: cfg.lowMark * cfg.threshold, Hold: cfg.hold, MaxBytes: cfg.aggMaxMiB << 20,
		Recorder: rec, Peers: peers, Logger: log, Registerer: reg,
	}, pub)
}

// newDetector returns the detector role, sending to sink and registered in
// ZooKeeper through sess.
func newDetector(ctx context.Context, cfg config, sess *zkgroup.Session, sink detector.Sink, log *slog.Logger, reg prometheus.Registerer) (*detector.Detector, error) {
	if err := ensureTopic(ctx, cfg, log); err != nil {
		return nil, err
	}
	src, err := kafkaio.NewSource(kafkaio.GroupConfig{
		Brokers: cfg.brokers, Topics: cfg.topics(), Group: cmp.Or(cfg.group, hotset.DefaultGroup),
		// The broker's minimum: a dead detector's partitions wait this
		// long for a new owner.
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second,
		FromOldest: cfg.fromOldest, MaxWait: cfg.fetchWait, MinBytes: cfg.fetchMin,
		Security: cfg.sec.kafka, Logger: log, Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("detector: %w", err)
	}
	return detector.New(detector.Config{
		Source: src, Takeover: src.Takeover(), Inputs: detectorInputs(cfg.inputs, 0, reg),
		Window: cfg.window, Threshold: cfg.threshold, Alpha: cfg.filterLoss, CommitInterval: cfg.commitEvery, StallHold: cfg.stallHold,
		Membership: sess, Root: cfg.zkRoot, ID: cfg.id, Addr: cfg.advertise,
		Logger: log, Registerer: reg,
	}, sink)
}

// ensureTopic makes sure the access topics exist: a group formed before its
// topic exists gets no partitions of it until its partition watch sees the
// topic (kafkaio, every 5 s). Only a missing broker and a replication factor
// the cluster cannot meet are errors; otherwise the detector waits for the
// topic.
func ensureTopic(ctx context.Context, cfg config, log *slog.Logger) error {
	spec := kafkaio.TopicSpec{Partitions: cfg.partitions, Replicas: cfg.replicas}
	for _, topic := range cfg.topics() {
		n, err := kafkaio.EnsureTopicSpec(ctx, cfg.sec.kafka, cfg.brokers, topic, spec)
		switch {
		case errors.Is(err, kafkaio.ErrNoBroker):
			return fmt.Errorf("%w (is Kafka running? `make up` starts one)", err)
		case errors.Is(err, kafka.InvalidReplicationFactor):
			return fmt.Errorf("%w (--replication-factor: 0 takes the brokers' default.replication.factor, and no factor can exceed the brokers' count)", err)
		case err != nil:
			log.Warn("could not make sure the access topic exists; the detector waits for it", "topic", topic, "err", err)
		default:
			log.Info("access topic", "topic", topic, "partitions", n)
		}
	}
	return nil
}

// consumedTopic is the topic /v1/config names: only a detector consumes
// one; with --input, the file's topics, comma-separated.
func consumedTopic(cfg config) string {
	if cfg.detector {
		return strings.Join(cfg.topics(), ",")
	}
	return ""
}

// newHandler builds the HTTP routes: the public API and page, the
// aggregator's internal API when that role runs, and the profiler when asked
// for.
func newHandler(p *parts) (http.Handler, error) {
	public, err := httpapi.New(httpapi.Config{
		HotSet: p.watcher.Snapshot, Aggregators: p.aggs, Gatherer: p.reg, Logger: p.log,
		Events: p.events, Threshold: p.cfg.threshold, Topic: consumedTopic(p.cfg),
		Lists: pinstore.New(p.sess, p.cfg.zkRoot), AdminToken: p.cfg.adminToken,
		Rules:   rulestore.New(p.sess, p.cfg.zkRoot),
		History: p.rec.History(), Webhooks: p.rec.Webhooks(),
		Ready: func() error { return ready(p) },
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", public)
	if p.agg != nil {
		// Its answers name the members this process routes to, so that a
		// process the others have dropped routes as they do (shardclient.Client.Send).
		mux.Handle(shardapi.Prefix, p.guard(p.aggs.Announce(p.agg.Handler())))
	}
	if p.cfg.pprof {
		mux.Handle("/debug/pprof/", pprofHandler(p.cfg.adminToken, p.log))
	}
	return mux, nil
}

// ready is /readyz: the hot set and every app's rules were read, and a
// detector has somewhere to send its counts.
func ready(p *parts) error {
	select {
	case <-p.watcher.Ready():
	default:
		return errors.New("hot set not read from ZooKeeper yet")
	}
	select {
	case <-p.rules.Ready():
	default:
		return errors.New("rules not read from ZooKeeper yet")
	}
	if p.det == nil {
		return nil
	}
	if len(p.aggs.Members()) == 0 {
		return errors.New("no aggregator member registered")
	}
	// An unreachable aggregator makes the detector not ready, never the
	// process exit: the aggregator and the API here stay up.
	return p.det.Healthy()
}

// listen serves h on cfg's HTTP address (HTTPS with --tls-cert) and returns
// the address it listens at; served receives Serve's error.
func listen(cfg config, h http.Handler) (srv *http.Server, at string, served <-chan error, err error) {
	srv = newServer(h)
	if srv.TLSConfig, err = cfg.sec.serverTLS(); err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--http-addr: %w", err)
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	ch := make(chan error, 1)
	go func() { ch <- srv.Serve(ln) }()
	return srv, ln.Addr().String(), ch, nil
}

// shutdown closes the HTTP server, waiting up to 5s for requests in flight.
func shutdown(srv *http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("HTTP server shutdown", "err", err)
	}
}

// runRoles runs the roles until ctx ends, a background role fails or the
// HTTP server stops (served). The background roles (the ring, the hot-set
// watcher, the aggregator) outlive the detector: they stop on their own
// context, canceled only after the detector returned. It returns the roles'
// error and the server's, if it stopped by itself.
func runRoles(ctx context.Context, p *parts, served <-chan error) (runErr, srvErr error) {
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	g, gctx := errgroup.WithContext(bg)
	// A role that returns because bg was canceled has not failed.
	goRole := func(fn func(context.Context) error) {
		g.Go(func() error {
			if err := fn(gctx); err != nil && bg.Err() == nil {
				return err
			}
			return nil
		})
	}
	goRole(func(ctx context.Context) error { return p.aggs.Follow(ctx, p.sess) })
	goRole(p.watcher.Run)
	goRole(p.rules.Run)
	if p.agg != nil {
		goRole(p.agg.Run)
	}

	// The detector (or, without one, the wait) ends on a signal, or when a
	// background role or the HTTP server fails.
	fgCtx, stopFg := context.WithCancel(ctx)
	defer stopFg()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-gctx.Done():
		case srvErr = <-served:
		case <-fgCtx.Done():
		}
		stopFg()
	}()
	var detErr error
	if p.det != nil {
		detErr = p.det.Run(fgCtx)
	} else {
		<-fgCtx.Done()
	}
	stopBg()
	bgErr := g.Wait()
	<-stopped
	if errors.Is(srvErr, http.ErrServerClosed) {
		srvErr = nil
	}
	return errors.Join(detErr, bgErr), srvErr
}
