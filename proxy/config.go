package proxy

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotset"
)

// Config is a Proxy's configuration. A zero field means its default.
type Config struct {
	// Redis is the Redis every command is forwarded to (host:port);
	// required unless RedisCluster is set.
	Redis string
	// RedisCluster, if set, are seed nodes (host:port) of a Redis Cluster
	// to stand in front of instead of Redis: the proxy shows its clients a
	// cluster of itself and routes each command to its slot's master.
	RedisCluster []string
	// Upstream is how clients' commands reach Redis: UpstreamDedicated (""
	// means it), one upstream connection per client connection (in
	// cluster mode, per client connection and master), or UpstreamShared,
	// a few pipelined connections (per master) shared by every client
	// until its connection acquires state (docs/proxy.md, "Shared upstream
	// connections").
	Upstream string
	// UpstreamConns is, with UpstreamShared, how many shared connections
	// the proxy keeps to Redis, or to each master; 0 means 2.
	UpstreamConns int
	// RedisUser and RedisPassword are the ACL user of the proxy's own Redis
	// connections (value loads, invalidations, client tracking); "" means
	// the default user. Clients authenticate themselves.
	RedisUser, RedisPassword string
	// RedisTLS, if set, is how every Redis connection is secured, the
	// clients' upstream connections included; nil means plain TCP.
	RedisTLS *tls.Config

	// App is the app whose hot set is followed and under which accesses are
	// reported; required. A connection may name another with CLIENT SETNAME
	// app:NAME.
	App string
	// Instance is this instance's name in the reports; "" means
	// <host name>/<pid>.
	Instance string

	// ZooKeeper are the servers the hot set is read from; nil means none:
	// nothing is ever hot.
	ZooKeeper []string
	// ZooKeeperRoot is the root of everything Hotspot keeps there; "" means
	// hotset.DefaultRoot.
	ZooKeeperRoot string
	// ZooKeeperUser and ZooKeeperPassword are the digest identity the hot
	// set is read as; "" means none.
	ZooKeeperUser, ZooKeeperPassword string

	// Brokers are the Kafka bootstrap brokers the accesses are reported to;
	// nil means none: nothing is reported.
	Brokers []string
	// Topic is the access-event topic; "" means hotset.DefaultTopic.
	Topic string
	// KafkaTLS, if set, secures the Kafka connections.
	KafkaTLS *tls.Config
	// KafkaSASL is the SASL mechanism (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512) of KafkaUser and KafkaPassword; "" means none.
	KafkaSASL, KafkaUser, KafkaPassword string

	// HotReadLimit is the reads of hot keys per second this instance sends
	// to Redis at most (the SDK's hot-read bucket); past it a read is
	// answered with a blank. 0 means 400.
	HotReadLimit float64
	// LimitedError makes that blank an error (-HOTKEY_LIMITED ...); false
	// means a null.
	LimitedError bool
	// ReportSample counts one read in this many, with that weight; writes
	// always count. 0 means 1.
	ReportSample int
	// L1Bytes is the bytes of hot keys' values kept in L1; 0 means 64 MiB.
	L1Bytes int64
	// L1TTL is how long a value or reply is served from L1 before it is
	// read again; 0 means 10 s.
	L1TTL time.Duration
	// NoRedisTracking turns off Redis' client tracking of hot keys; false
	// means on: writes that bypass the proxies reach L1 within a round trip
	// instead of L1TTL.
	NoRedisTracking bool
	// ReplyCacheBytes is, per app, the bytes of cached replies of hot keys
	// (commands other than GET); 0 means 64 MiB.
	ReplyCacheBytes int64
	// MaxApps is how many apps are followed at most, App included; 0 means
	// 16.
	MaxApps int

	// MaxClientBuffer bounds the bytes of one client's commands the proxy
	// holds: the command being read and what queued commands keep until
	// their replies. A command that cannot fit is refused and the
	// connection closed. 0 means 64 MiB. Redis takes arguments of up to
	// 512 MB: raise it if the app writes values bigger than 64 MiB.
	MaxClientBuffer int64
	// MaxBuffer bounds the same bytes for every client together; 0 means
	// 256 MiB. A client whose command would pass it is refused in the same
	// way.
	MaxBuffer int64

	// ShutdownGrace is how long, once Serve's context ends, the replies of
	// commands already read may take; 0 means 5 s.
	ShutdownGrace time.Duration
	// CommandTableWait bounds how long Serve waits for Redis' COMMAND table
	// before it accepts connections (until it is read, commands pass
	// through unreported); 0 means 5 s.
	CommandTableWait time.Duration

	// Logger is where the proxy logs; nil discards.
	Logger *slog.Logger
	// Registerer gets the proxy's metrics and those of its SDK Clients
	// (labelled app=NAME); nil means not exported.
	Registerer prometheus.Registerer
}

// The values of Config.Upstream.
const (
	UpstreamDedicated = "dedicated"
	UpstreamShared    = "shared"
)

// withDefaults returns cfg with every zero field given its default, or an
// error naming the first invalid field.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.App == "":
		return cfg, errors.New("proxy: Config.App is required")
	case cfg.Redis == "" && len(cfg.RedisCluster) == 0:
		return cfg, errors.New("proxy: Config.Redis or Config.RedisCluster is required")
	case cfg.HotReadLimit < 0:
		return cfg, fmt.Errorf("proxy: Config.HotReadLimit: %v must be >= 0", cfg.HotReadLimit)
	case cfg.ReportSample < 0:
		return cfg, fmt.Errorf("proxy: Config.ReportSample: %d must be >= 0", cfg.ReportSample)
	case cfg.MaxApps < 0:
		return cfg, fmt.Errorf("proxy: Config.MaxApps: %d must be >= 0", cfg.MaxApps)
	case cfg.L1Bytes < 0 || cfg.ReplyCacheBytes < 0 || cfg.MaxClientBuffer < 0 || cfg.MaxBuffer < 0:
		return cfg, errors.New("proxy: Config.L1Bytes, ReplyCacheBytes, MaxClientBuffer and MaxBuffer must be >= 0")
	case cfg.Upstream != "" && cfg.Upstream != UpstreamDedicated && cfg.Upstream != UpstreamShared:
		return cfg, fmt.Errorf("proxy: Config.Upstream: %q, want %q or %q", cfg.Upstream, UpstreamDedicated, UpstreamShared)
	case cfg.UpstreamConns < 0:
		return cfg, fmt.Errorf("proxy: Config.UpstreamConns: %d must be >= 0", cfg.UpstreamConns)
	case cfg.L1TTL < 0 || cfg.ShutdownGrace < 0 || cfg.CommandTableWait < 0:
		return cfg, errors.New("proxy: Config.L1TTL, ShutdownGrace and CommandTableWait must be >= 0")
	}
	cfg.Upstream = cmp.Or(cfg.Upstream, UpstreamDedicated)
	cfg.UpstreamConns = cmp.Or(cfg.UpstreamConns, 2)
	cfg.ZooKeeperRoot = cmp.Or(cfg.ZooKeeperRoot, hotset.DefaultRoot)
	cfg.Topic = cmp.Or(cfg.Topic, hotset.DefaultTopic)
	cfg.HotReadLimit = cmp.Or(cfg.HotReadLimit, 400)
	cfg.ReportSample = cmp.Or(cfg.ReportSample, 1)
	cfg.L1Bytes = cmp.Or(cfg.L1Bytes, 64<<20)
	cfg.L1TTL = cmp.Or(cfg.L1TTL, 10*time.Second)
	cfg.ReplyCacheBytes = cmp.Or(cfg.ReplyCacheBytes, 64<<20)
	cfg.MaxApps = cmp.Or(cfg.MaxApps, 16)
	cfg.MaxClientBuffer = cmp.Or(cfg.MaxClientBuffer, 64<<20)
	cfg.MaxBuffer = cmp.Or(cfg.MaxBuffer, 256<<20)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, 5*time.Second)
	cfg.CommandTableWait = cmp.Or(cfg.CommandTableWait, 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry() // not exported
	}
	return cfg, nil
}
