package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
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

// parseConfig reads flags, each defaulting to its ITEMAPP_* environment
// variable (lookupEnv is os.LookupEnv), then to the built-in default. An
// empty --zk, --redis or --brokers (or its variable set to "") turns that
// part off.
func parseConfig(args []string, lookupEnv func(string) (string, bool)) (config, error) {
	fs := flag.NewFlagSet("itemapp", flag.ContinueOnError)
	envName := func(name string) string { return "ITEMAPP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }
	str := func(name, def, usage string) *string {
		if v, ok := lookupEnv(envName(name)); ok {
			def = v
		}
		return fs.String(name, def, usage+" (env "+envName(name)+")")
	}
	app := str("app", "itemapp", "app name under which accesses are reported and the hot set is read")
	zk := str("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated; empty: nothing is ever hot")
	zkRoot := str("zk-root", "/hotspot", "ZooKeeper root of Hotspot's nodes")
	redis := str("redis", "127.0.0.1:16379", "Redis servers, comma-separated (several: sharded by Hotspot's ring); empty: no L2")
	prefix := str("redis-prefix", "", "prefix of the Redis keys")
	brokers := str("brokers", "127.0.0.1:19092", "Kafka brokers for access reports, comma-separated; empty: no reports")
	topic := str("topic", "hotspot.access", "access-event topic")
	httpAddr := str("http-addr", "127.0.0.1:8080", "HTTP listen address")
	latency := str("source-latency", "5ms", "latency of every read of the simulated source")
	items := str("items", "1000000", "ids 0..items-1 exist in the source; others are 404")
	level := str("log-level", "info", "log level: debug, info, warn, error")
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
	c := config{
		app: *app, zk: splitList(*zk), zkRoot: *zkRoot, redis: splitList(*redis), redisPrefix: *prefix,
		brokers: splitList(*brokers), topic: *topic, httpAddr: *httpAddr,
	}
	if c.app == "" {
		return c, fmt.Errorf("--app: must not be empty")
	}
	var err error
	if c.sourceLatency, err = time.ParseDuration(*latency); err != nil || c.sourceLatency < 0 {
		return c, fmt.Errorf("--source-latency: %q is not a duration >= 0", *latency)
	}
	if _, err = fmt.Sscan(*items, &c.items); err != nil || c.items <= 0 {
		return c, fmt.Errorf("--items: %q is not a positive integer", *items)
	}
	if _, _, err := net.SplitHostPort(c.httpAddr); err != nil {
		return c, fmt.Errorf("--http-addr: %w", err)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
