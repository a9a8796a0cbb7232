package main

import (
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

const itemappHelp = `A demo app serving GET /item/{id} through hotcache.`

// parseConfig reads the flags and their ITEMAPP_* variables (envflag's rule:
// an empty variable counts as unset). An empty --zk, --redis or --brokers
// turns that part off.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := envflag.New("itemapp", "ITEMAPP", itemappHelp)
	app := fs.String("app", "itemapp", "app name under which accesses are reported and the hot set is read")
	zk := fs.String("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated; empty: nothing is ever hot")
	zkRoot := fs.String("zk-root", hotset.DefaultRoot, "ZooKeeper root of Hotspot's nodes")
	redis := fs.String("redis", "127.0.0.1:16379", "Redis servers, comma-separated (several: sharded by Hotspot's ring); empty: no L2")
	prefix := fs.String("redis-prefix", "", "prefix of the Redis keys")
	brokers := fs.String("brokers", "127.0.0.1:19092", "Kafka brokers for access reports, comma-separated; empty: no reports")
	topic := fs.String("topic", hotset.DefaultTopic, "access-event topic")
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "HTTP listen address")
	latency := fs.Duration("source-latency", 5*time.Millisecond, "latency of every read of the simulated source")
	items := fs.Int("items", 1_000_000, "ids 0..items-1 exist in the source; others are 404")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := envflag.Parse(fs, "ITEMAPP", args, getenv); err != nil {
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
