package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/aggregator/zkpublish"
	"github.com/hotspot-dev/hotspot/detector"
	"github.com/hotspot-dev/hotspot/internal/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/pinstore"
	"github.com/hotspot-dev/hotspot/internal/shardclient"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

var _ detector.Sink = (*shardclient.Client)(nil)

// run serves until ctx is canceled, then shuts down in dependency order: the
// detector stops and hands its last counts to the aggregators (which are
// still serving), then the aggregator publishes its final hot set and leaves
// ZooKeeper, then the HTTP server closes.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sess, err := zkgroup.Connect(connectCtx, cfg.zk, zkgroup.Config{Logger: log, Registerer: reg})
	cancel()
	if err != nil {
		return fmt.Errorf("no ZooKeeper session with %v (is ZooKeeper running? `make up` starts one): %w", cfg.zk, err)
	}
	defer sess.Close()

	sink, err := shardclient.New(shardclient.Config{Root: cfg.zkRoot, Source: cfg.id, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	defer sink.Close()
	events := httpapi.NewEvents(500)
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: cfg.zkRoot, OnChange: events.Record, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}

	var agg *aggregator.Aggregator
	if cfg.aggregator {
		pub, err := zkpublish.New(sess, zkpublish.Config{Root: cfg.zkRoot, Logger: log})
		if err != nil {
			return err
		}
		agg, err = aggregator.New(aggregator.Config{
			ID: cfg.id, Addr: cfg.advertise, Threshold: cfg.threshold, Window: cfg.window,
			Logger: log, Registerer: reg,
		}, pub)
		if err != nil {
			return err
		}
	}

	var detectors atomic.Int64 // live detectors, from ZooKeeper
	detectorsDir := path.Join(cfg.zkRoot, "members", "detectors")
	var det *detector.Detector
	if cfg.detector {
		// A group formed before its topic exists gets no partitions until
		// the next rebalance: make sure the topic is there first.
		n, err := kafkaio.EnsureTopic(ctx, cfg.brokers, cfg.topic, cfg.partitions)
		switch {
		case errors.Is(err, kafkaio.ErrNoBroker):
			return fmt.Errorf("%w (is Kafka running? `make up` starts one)", err)
		case err != nil:
			log.Warn("could not make sure the access topic exists; the detector waits for it", "topic", cfg.topic, "err", err)
		default:
			log.Info("access topic", "topic", cfg.topic, "partitions", n)
		}
		det, err = detector.New(detector.Config{
			Brokers: cfg.brokers, Topic: cfg.topic, Group: cfg.group,
			Window: cfg.window, Threshold: cfg.threshold, FromOldest: cfg.fromOldest,
			// The broker's minimum: a dead detector's partitions wait this
			// long for a new owner.
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second,
			Detectors: func() int { return max(1, int(detectors.Load())) },
			Logger:    log, Registerer: reg,
		}, sink)
		if err != nil {
			return err
		}
	}

	api, err := httpapi.New(httpapi.Config{
		HotSet: watcher.Snapshot, Members: sink.Members, Gatherer: reg, Logger: log,
		Events: events, Threshold: cfg.threshold,
		Lists: pinstore.New(sess, cfg.zkRoot), AdminToken: cfg.adminToken,
		Ready: func() error { return ready(watcher, sink, det) },
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	if agg != nil {
		mux.Handle("/internal/v1/", agg.Handler())
	}
	if cfg.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("--http-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("hotspotd serving", "http", ln.Addr().String(), "id", cfg.id,
		"detector", cfg.detector, "aggregator", cfg.aggregator, "zk", cfg.zk, "root", cfg.zkRoot)

	// The background roles outlive the detector (see above): they stop on
	// their own context, canceled only after the detector returned.
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
	goRole(func(ctx context.Context) error { return sink.Follow(ctx, sess) })
	goRole(watcher.Run)
	if agg != nil {
		goRole(agg.Run)
	}
	if det != nil {
		member := hotset.EncodeMember(hotset.Member{ID: cfg.id, Addr: cfg.advertise})
		goRole(func(ctx context.Context) error {
			return zkgroup.Join(ctx, sess, detectorsDir, hotset.Escape(cfg.id), member)
		})
		goRole(func(ctx context.Context) error {
			return zkgroup.Watch(ctx, sess, detectorsDir, func(m map[string][]byte) { detectors.Store(int64(len(m))) })
		})
	}

	// The detector (or, without one, the wait) ends on a signal, or when a
	// background role or the HTTP server fails.
	fgCtx, stopFg := context.WithCancel(ctx)
	defer stopFg()
	var srvErr error
	go func() {
		select {
		case <-gctx.Done():
		case srvErr = <-served:
		case <-fgCtx.Done():
		}
		stopFg()
	}()
	var detErr error
	if det != nil {
		detErr = det.Run(fgCtx)
	} else {
		<-fgCtx.Done()
	}
	stopBg()
	bgErr := g.Wait()

	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("HTTP server shutdown", "err", err)
	}
	if errors.Is(srvErr, http.ErrServerClosed) {
		srvErr = nil
	}
	return errors.Join(detErr, bgErr, srvErr)
}

func ready(w *hotwatch.Watcher, sink *shardclient.Client, det *detector.Detector) error {
	select {
	case <-w.Ready():
	default:
		return errors.New("hot set not read from ZooKeeper yet")
	}
	if det == nil {
		return nil
	}
	if len(sink.Members()) == 0 {
		return errors.New("no aggregator member registered")
	}
	// An unreachable aggregator makes the detector not ready, never the
	// process exit: the aggregator and the API here stay up.
	return det.Healthy()
}
