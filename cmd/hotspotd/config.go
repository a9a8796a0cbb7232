package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotset"
)

type config struct {
	brokers    []string
	topic      string
	group      string
	zk         []string
	zkRoot     string
	httpAddr   string
	advertise  string // host:port other processes reach this one at
	id         string
	detector   bool
	aggregator bool
	threshold  float64
	window     time.Duration
	fromOldest bool
	partitions int
	adminToken string
	pprof      bool
	logLevel   slog.Level
}

// parseConfig reads flags, each defaulting to its HOTSPOT_* environment
// variable, then to the built-in default.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("hotspotd", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv("HOTSPOT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
			return v
		}
		return def
	}
	str := func(name, def, usage string) *string {
		return fs.String(name, env(name, def), usage+" (env HOTSPOT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+")")
	}
	brokers := str("brokers", "127.0.0.1:19092", "Kafka bootstrap brokers, comma-separated")
	topic := str("topic", "hotspot.access", "access-event topic")
	group := str("group", "hotspot-detector", "detector consumer group")
	zkServers := str("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated")
	zkRoot := str("zk-root", hotset.DefaultRoot, "ZooKeeper root of everything Hotspot keeps")
	httpAddr := str("http-addr", "127.0.0.1:7070", "HTTP listen address (API, metrics, internal aggregator API)")
	advertise := str("advertise-addr", "", "host:port other hotspotd processes reach this one at (default: --http-addr)")
	id := str("id", "", "aggregator shard id, stable across restarts (default: host name and HTTP port)")
	roles := str("roles", "detector,aggregator", "roles to run: detector, aggregator or both")
	threshold := str("threshold", "1000", "accesses per second that make a key hot")
	window := str("window", "1s", "sliding window of the rate")
	fromOldest := str("from-oldest", "false", "read partitions without a committed offset from the oldest record")
	partitions := str("partitions", "8", "partitions of the access topic when the detector has to create it")
	pprof := str("pprof", "false", "serve Go's profiler at /debug/pprof/ on the HTTP address")
	// Not through str: a default taken from the environment would print
	// the secret in --help.
	adminToken := fs.String("admin-token", "", "bearer token that authorizes pin and block changes; empty refuses them (env HOTSPOT_ADMIN_TOKEN)")
	level := str("log-level", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hotspotd [flags]\n\nHotspot's server: detector and aggregator roles plus the HTTP API.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}

	c := config{
		brokers: splitList(*brokers), topic: *topic, group: *group,
		zk: splitList(*zkServers), zkRoot: *zkRoot, httpAddr: *httpAddr,
		advertise: *advertise, id: *id, adminToken: cmp.Or(*adminToken, getenv("HOTSPOT_ADMIN_TOKEN")),
	}
	for _, r := range splitList(*roles) {
		switch r {
		case "detector":
			c.detector = true
		case "aggregator":
			c.aggregator = true
		default:
			return c, fmt.Errorf("--roles: unknown role %q (want detector, aggregator or both)", r)
		}
	}
	if !c.detector && !c.aggregator {
		return c, fmt.Errorf("--roles: at least one of detector, aggregator")
	}
	if c.detector && len(c.brokers) == 0 {
		return c, fmt.Errorf("--brokers: the detector role needs at least one broker")
	}
	if len(c.zk) == 0 {
		return c, fmt.Errorf("--zk: at least one ZooKeeper server")
	}
	if !strings.HasPrefix(c.zkRoot, "/") || (len(c.zkRoot) > 1 && strings.HasSuffix(c.zkRoot, "/")) {
		return c, fmt.Errorf("--zk-root: %q must be an absolute znode path without a trailing slash", c.zkRoot)
	}
	var err error
	if _, err = fmt.Sscan(*threshold, &c.threshold); err != nil || c.threshold <= 0 {
		return c, fmt.Errorf("--threshold: %q is not a positive number", *threshold)
	}
	if c.window, err = time.ParseDuration(*window); err != nil || c.window < 100*time.Millisecond || c.window%(100*time.Millisecond) != 0 {
		return c, fmt.Errorf("--window: %q must be a duration, a multiple of 100ms", *window)
	}
	if _, err = fmt.Sscan(*fromOldest, &c.fromOldest); err != nil {
		return c, fmt.Errorf("--from-oldest: %q is not true or false", *fromOldest)
	}
	if _, err = fmt.Sscan(*partitions, &c.partitions); err != nil || c.partitions < 1 {
		return c, fmt.Errorf("--partitions: %q is not a positive integer", *partitions)
	}
	if _, err = fmt.Sscan(*pprof, &c.pprof); err != nil {
		return c, fmt.Errorf("--pprof: %q is not true or false", *pprof)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	host, port, err := net.SplitHostPort(c.httpAddr)
	if err != nil {
		return c, fmt.Errorf("--http-addr: %w", err)
	}
	if c.advertise == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			h, _ := os.Hostname()
			host = h
		}
		c.advertise = net.JoinHostPort(host, port)
	}
	if c.id == "" {
		h, _ := os.Hostname()
		c.id = h + "-" + port
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
