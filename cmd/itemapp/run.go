package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/itemdb"
)

// run serves until ctx ends, then shuts down cleanly. If ready is not nil it
// receives the listening address once the server accepts requests.
func run(ctx context.Context, cfg config, log *slog.Logger, ready chan<- string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	src := itemdb.New(cfg.items, cfg.sourceLatency, hotcache.ErrNotFound)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "itemapp", Name: "source_reads_total", Help: "Reads of the simulated source of truth.",
	}, func() float64 { return float64(src.Reads()) }))

	opts := []hotcache.Option{
		hotcache.WithApp(cfg.app), hotcache.WithLoader(src), hotcache.WithRegisterer(reg), hotcache.WithLogger(log),
	}
	if len(cfg.zk) > 0 {
		opts = append(opts, hotcache.WithZooKeeper(cfg.zk, cfg.zkRoot))
	}
	if len(cfg.redis) > 0 {
		opts = append(opts, hotcache.WithRedis(cfg.redis...), hotcache.WithRedisKeyPrefix(cfg.redisPrefix))
	}
	if len(cfg.brokers) > 0 {
		opts = append(opts, hotcache.WithKafka(cfg.brokers, cfg.topic))
	}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := hotcache.New(startCtx, opts...)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler(c, src, reg, log), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("itemapp serving", "addr", ln.Addr().String(), "app", cfg.app)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return c.Close()
}

func handler(c *hotcache.Client, src *itemdb.DB, reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		key := "item:" + r.PathValue("id")
		v, err := c.Get(r.Context(), key)
		if c.IsHot(key) {
			w.Header().Set("X-Hot", "1")
		}
		if err != nil {
			httpError(w, err, log)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(v)
	})
	mux.HandleFunc("PUT /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.Set(r.Context(), "item:"+r.PathValue("id"), body); err != nil {
			httpError(w, err, log)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := c.Delete(r.Context(), "item:"+r.PathValue("id")); err != nil {
			httpError(w, err, log)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, struct {
			SourceReads   int64             `json:"source_reads"`
			SourceLatency string            `json:"source_latency"`
			HotKeys       []hotcache.HotKey `json:"hot_keys"`
		}{src.Reads(), src.Latency().String(), c.Hot()})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

func httpError(w http.ResponseWriter, err error, log *slog.Logger) {
	switch {
	case errors.Is(err, hotcache.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, hotcache.ErrThrottled), errors.Is(err, hotcache.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, context.Canceled):
		// the client went away
	default:
		log.Warn("itemapp: request failed", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
