// Command itemapp is a small demo application that serves GET /item/{id}
// through hotcache over a simulated source of truth with a fixed latency.
// The demo and the load tests run several of it to show what reaches Redis
// and the source before and after Hotspot promotes a key.
//
// Endpoints: GET/PUT/DELETE /item/{id}; GET /stats (JSON: source reads and
// hot keys); GET /metrics (Prometheus: hotcache's metrics and the source's
// own counter); GET /healthz.
//
// Every flag has an environment variable (ITEMAPP_ and the flag name in upper
// case with - as _), which the flag overrides; an empty variable counts as
// unset. SIGTERM or SIGINT: stop accepting requests, finish those in flight,
// flush the access reports and exit 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotspot-dev/hotspot/internal/liblog"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "itemapp: %v\n", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	liblog.Route(log) // the libraries' own lines, at debug
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("itemapp stopped", "err", err)
		os.Exit(1)
	}
	log.Info("itemapp stopped cleanly")
}
