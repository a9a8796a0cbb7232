package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/internal/envflag"
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

	redis            string        // host:port or redis:// URL of the history's Redis; "" keeps no history
	historyMaxLen    int64         // events kept per app, about
	historyRetention time.Duration // events older are trimmed; 0 keeps them until historyMaxLen
}

// parseConfig reads flags, each of which its HOTSPOT_* environment variable
// sets when the command line does not (an empty variable counts as unset).
func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("hotspotd", flag.ContinueOnError)
	env := func(name, usage string) string { return usage + " (env " + envflag.Name("HOTSPOT", name) + ")" }
	brokers := fs.String("brokers", "127.0.0.1:19092", env("brokers", "Kafka bootstrap brokers, comma-separated"))
	topic := fs.String("topic", "hotspot.access", env("topic", "access-event topic"))
	group := fs.String("group", "hotspot-detector", env("group", "detector consumer group"))
	zkServers := fs.String("zk", "127.0.0.1:12181", env("zk", "ZooKeeper servers, comma-separated"))
	zkRoot := fs.String("zk-root", hotset.DefaultRoot, env("zk-root", "ZooKeeper root of everything Hotspot keeps"))
	httpAddr := fs.String("http-addr", "127.0.0.1:7070", env("http-addr", "HTTP listen address (API, metrics, internal aggregator API)"))
	advertise := fs.String("advertise-addr", "", env("advertise-addr", "host:port other hotspotd processes reach this one at (default: --http-addr)"))
	id := fs.String("id", "", env("id", "aggregator shard id, stable across restarts (default: host name and HTTP port)"))
	roles := fs.String("roles", "detector,aggregator", env("roles", "roles to run: detector, aggregator or both"))
	threshold := fs.Float64("threshold", 1000, env("threshold", "accesses per second that make a key hot"))
	window := fs.Duration("window", time.Second, env("window", "sliding window of the rate, a multiple of 100ms"))
	fromOldest := fs.Bool("from-oldest", false, env("from-oldest", "read partitions without a committed offset from the oldest record"))
	partitions := fs.Int("partitions", 8, env("partitions", "partitions of the access topic when the detector has to create it"))
	pprof := fs.Bool("pprof", false, env("pprof", "serve Go's profiler at /debug/pprof/ on the HTTP address"))
	adminToken := fs.String("admin-token", "", env("admin-token", "bearer token that authorizes pin and block changes; empty refuses them"))
	redisAddr := fs.String("redis", "127.0.0.1:16379", env("redis", "Redis for the promotion history: host:port or redis://[:password@]host:port/db; empty keeps no history"))
	historyMaxLen := fs.Int64("history-maxlen", 100_000, env("history-maxlen", "promotions and demotions kept per app in the history, about"))
	historyRetention := fs.Duration("history-retention", 7*24*time.Hour, env("history-retention", "history events older than this are trimmed; 0 keeps them until --history-maxlen"))
	level := fs.String("log-level", "info", env("log-level", "log level: debug, info, warn, error"))
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
	if err := envflag.Apply(fs, "HOTSPOT", envflag.NonEmpty(getenv)); err != nil {
		return config{}, err
	}

	c := config{
		brokers: envflag.SplitList(*brokers), topic: *topic, group: *group,
		zk: envflag.SplitList(*zkServers), zkRoot: *zkRoot, httpAddr: *httpAddr,
		advertise: *advertise, id: *id, adminToken: *adminToken,
		threshold: *threshold, window: *window, fromOldest: *fromOldest, partitions: *partitions, pprof: *pprof,
		redis: *redisAddr, historyMaxLen: *historyMaxLen, historyRetention: *historyRetention,
	}
	for _, r := range envflag.SplitList(*roles) {
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
	if !(c.threshold > 0) {
		return c, fmt.Errorf("--threshold: %v is not a positive number", c.threshold)
	}
	if c.window < 100*time.Millisecond || c.window%(100*time.Millisecond) != 0 {
		return c, fmt.Errorf("--window: %v must be a multiple of 100ms", c.window)
	}
	if c.partitions < 1 {
		return c, fmt.Errorf("--partitions: %d is not a positive integer", c.partitions)
	}
	if c.historyMaxLen < 1 {
		return c, fmt.Errorf("--history-maxlen: %d is not a positive integer", c.historyMaxLen)
	}
	if c.historyRetention < 0 {
		return c, fmt.Errorf("--history-retention: %v must be >= 0", c.historyRetention)
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
