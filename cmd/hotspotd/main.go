// Command hotspotd is the Hotspot server: a detector (a Kafka consumer-group
// member counting access events), an aggregator shard (merging partial
// counts and publishing the hot set to ZooKeeper), or both, plus the HTTP API.
// N identical processes scale out: Kafka's group moves partitions between
// detectors and ZooKeeper membership moves keys between aggregators.
//
// Every flag has an environment variable (HOTSPOT_ and the flag name in
// upper case with - as _), which the flag overrides; an empty variable
// counts as unset. SIGTERM or SIGINT: stop consuming, hand the counts in
// flight to the aggregators, commit, publish the final hot set, leave
// ZooKeeper and exit 0.
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
		fmt.Fprintf(os.Stderr, "hotspotd: %v\n", err)
		os.Exit(2)
	}
	if cfg.checkInput != "" {
		os.Exit(checkInput(os.Stdout, cfg.checkInput, cfg.topic, cfg.sample, cfg.sample != ""))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	liblog.Route(log) // the libraries' own lines, at debug
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("hotspotd stopped", "err", err)
		os.Exit(1)
	}
	log.Info("hotspotd stopped cleanly")
}
