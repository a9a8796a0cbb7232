package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
)

type config struct {
	app           string
	zk            []string
	zkRoot        string
	redis         []string
	redisPrefix   string
	brokers       []string
	topic         string
	httpAddr      string
	sourceLatency time.Duration
	items         int
	logLevel      slog.Level
}

// parseConfig reads flags, each of which its ITEMAPP_* environment variable
// sets when the command line does not (lookupEnv is os.LookupEnv). An empty
// --zk, --redis or --brokers (or its variable set to "") turns that part off.
func parseConfig(args []string, lookupEnv func(string) (string, bool)) (config, error) {
	fs := flag.NewFlagSet("itemapp", flag.ContinueOnError)
	env := func(name, usage string) string { return usage + " (env " + envflag.Name("ITEMAPP", name) + ")" }
	app := fs.String("app", "itemapp", env("app", "app name under which accesses are reported and the hot set is read"))
	zk := fs.String("zk", "127.0.0.1:12181", env("zk", "ZooKeeper servers, comma-separated; empty: nothing is ever hot"))
	zkRoot := fs.String("zk-root", hotset.DefaultRoot, env("zk-root", "ZooKeeper root of Hotspot's nodes"))
	redis := fs.String("redis", "127.0.0.1:16379", env("redis", "Redis servers, comma-separated (several: sharded by Hotspot's ring); empty: no L2"))
	prefix := fs.String("redis-prefix", "", env("redis-prefix", "prefix of the Redis keys"))
	brokers := fs.String("brokers", "127.0.0.1:19092", env("brokers", "Kafka brokers for access reports, comma-separated; empty: no reports"))
	topic := fs.String("topic", hotset.DefaultTopic, env("topic", "access-event topic"))
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", env("http-addr", "HTTP listen address"))
	latency := fs.Duration("source-latency", 5*time.Millisecond, env("source-latency", "latency of every read of the simulated source"))
	items := fs.Int("items", 1_000_000, env("items", "ids 0..items-1 exist in the source; others are 404"))
	level := fs.String("log-level", "info", env("log-level", "log level: debug, info, warn, error"))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: itemapp [flags]\n\nA demo app serving GET /item/{id} through hotcache.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	if err := envflag.Apply(fs, "ITEMAPP", lookupEnv); err != nil {
		return config{}, err
	}
	c := config{
		app: *app, zk: envflag.SplitList(*zk), zkRoot: *zkRoot, redis: envflag.SplitList(*redis), redisPrefix: *prefix,
		brokers: envflag.SplitList(*brokers), topic: *topic, httpAddr: *httpAddr,
		sourceLatency: *latency, items: *items,
	}
	if c.app == "" {
		return c, fmt.Errorf("--app: must not be empty")
	}
	if c.sourceLatency < 0 {
		return c, fmt.Errorf("--source-latency: %v is not >= 0", c.sourceLatency)
	}
	if c.items <= 0 {
		return c, fmt.Errorf("--items: %d is not a positive integer", c.items)
	}
	if _, _, err := net.SplitHostPort(c.httpAddr); err != nil {
		return c, fmt.Errorf("--http-addr: %w", err)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	return c, nil
}
