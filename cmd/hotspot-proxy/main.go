// Command hotspot-proxy is a Redis sidecar: any Redis client points at it
// instead of Redis and gets the hotcache SDK's protection without a line of
// code: hot keys answered from the proxy's L1 within the per-instance
// hot-read limit, every access reported to Hotspot, and writes through it
// invalidating the key in every proxy's and every SDK instance's L1.
// docs/proxy.md is its manual.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

type config struct {
	listen, http   string
	redis          string
	redisCluster   []string // --redis-cluster: seed nodes of a Redis Cluster (cluster.go)
	redisUser      string
	redisPassword  string // HOTSPOT_REDIS_PASSWORD
	redisTLS       *tls.Config
	brokers        []string
	topic          string
	zk             []string
	zkRoot         string
	zkUser         string // HOTSPOT_ZK_DIGEST (user:password): the app identity the proxy reads the hot set as
	zkPassword     string
	kafkaTLS       *tls.Config
	kafkaSASL      string
	kafkaUser      string
	kafkaPassword  string
	app            string
	instance       string
	hotRate        float64
	reportSample   int // --report-sample: count one read in this many, with that weight
	l1Bytes        int64
	l1TTL          time.Duration
	redisTracking  bool
	replyBytes     int64
	limitedError   bool
	maxApps        int
	shutdownGrace  time.Duration
	commandWait    time.Duration // how long to wait for the COMMAND table before serving (commandTableWait; tests shorten it)
	logLevel       slog.Level
	redisTLSCAFile string
}

const proxyHelp = `Redis sidecar proxy: hot keys from the hotcache SDK's L1, accesses reported to Hotspot (docs/proxy.md).`

func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := envflag.New("hotspot-proxy", "HOTSPOT", proxyHelp)
	var c config
	var brokers, zk, logLevel, limited, redisCluster string
	var l1MiB, replyMiB int64
	fs.StringVar(&c.listen, "listen", "127.0.0.1:6380", "RESP listen address the app's Redis clients connect to")
	fs.StringVar(&c.http, "http", "127.0.0.1:6381", "HTTP listen address: /metrics and /healthz; empty for none")
	fs.StringVar(&c.redis, "redis", "127.0.0.1:16379", "the Redis every command is forwarded to (host:port)")
	fs.StringVar(&redisCluster, "redis-cluster", "", "seed nodes of a Redis Cluster (host:port, comma-separated) to stand in front of instead of --redis: the proxy shows its clients a one-node cluster and routes each command to its slot's master")
	fs.StringVar(&c.redisUser, "redis-user", "", "ACL user of the proxy's own Redis connections (hot-key loads, invalidations; password from HOTSPOT_REDIS_PASSWORD). Clients authenticate themselves")
	fs.StringVar(&c.redisTLSCAFile, "redis-tls-ca", "", "PEM CA bundle: talk TLS to Redis, verifying it with this CA")
	fs.StringVar(&brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap brokers for the access reports, comma-separated; empty reports nothing")
	fs.StringVar(&c.topic, "topic", hotset.DefaultTopic, "access-event topic")
	fs.StringVar(&zk, "zk", "127.0.0.1:12181", "ZooKeeper servers to follow the hot set on, comma-separated; empty: nothing is hot")
	fs.StringVar(&c.zkRoot, "zk-root", hotset.DefaultRoot, "ZooKeeper root of everything Hotspot keeps")
	fs.StringVar(&c.app, "app", "", "the app whose hot set is followed and whose accesses are reported (required; a connection may name another with CLIENT SETNAME app:NAME)")
	fs.IntVar(&c.reportSample, "report-sample", 1, "count one read in N, with weight N, to cut what reporting costs this proxy and the broker at high rates; each key's reported rate is then an estimate (writes are always counted)")
	fs.StringVar(&c.instance, "instance", "", "this instance's name in the reports (default <host name>/<pid>; give each pod its own, e.g. the pod name)")
	fs.Float64Var(&c.hotRate, "hot-read-limit", 400, "reads of hot keys per second this instance sends to Redis at most (the SDK's hot-read bucket); past it a read is answered with a blank")
	fs.Int64Var(&l1MiB, "l1-mib", 64, "MiB of hot keys' values in L1 (the SDK's budget)")
	fs.DurationVar(&c.l1TTL, "l1-ttl", 10*time.Second, "how long a value or reply is served from L1 before it is read again; bounds writes that bypass the proxies where Redis does not track them (--redis-tracking)")
	fs.BoolVar(&c.redisTracking, "redis-tracking", true, "ask Redis (client tracking) to tell of writes to hot keys that bypass the proxies and the SDK, so they reach L1 within a round trip instead of --l1-ttl (with --redis and --redis-cluster)")
	fs.Int64Var(&replyMiB, "reply-cache-mib", 64, "MiB of cached replies of hot keys (commands other than GET), per app")
	fs.StringVar(&limited, "limited-reply", "null", "reply to a read over the hot-read limit: null, or error (-HOTKEY_LIMITED)")
	fs.IntVar(&c.maxApps, "max-apps", 16, "apps (CLIENT SETNAME app:NAME) followed at most, --app included")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 5*time.Second, "on SIGTERM, how long replies of commands already read may take")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	kf := kafkaio.AddSecurityFlags(fs)
	if err := envflag.Parse(fs, "HOTSPOT", args, getenv); err != nil {
		return c, err
	}
	c.brokers, c.zk = envflag.SplitList(brokers), envflag.SplitList(zk)
	c.redisCluster = envflag.SplitList(redisCluster)
	// The command line's choice wins over the other's variable (a shell may
	// hold both); without one, both variables are ambiguous.
	cmdline := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmdline[f.Name] = true }) // not those set from variables
	switch {
	case cmdline["redis"] && cmdline["redis-cluster"]:
		return c, errors.New("--redis and --redis-cluster are exclusive")
	case cmdline["redis"]:
		c.redisCluster = nil
	case cmdline["redis-cluster"]:
	case len(c.redisCluster) > 0 && getenv("HOTSPOT_REDIS") != "":
		return c, errors.New("HOTSPOT_REDIS and HOTSPOT_REDIS_CLUSTER are both set: choose with --redis or --redis-cluster")
	}
	c.l1Bytes, c.replyBytes = l1MiB<<20, replyMiB<<20
	c.commandWait = commandTableWait
	if err := c.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	switch limited {
	case "null":
	case "error":
		c.limitedError = true
	default:
		return c, fmt.Errorf("--limited-reply: %q, want null or error", limited)
	}
	switch {
	case c.app == "":
		return c, errors.New("--app is required")
	case c.redis == "":
		return c, errors.New("--redis is required")
	case !(c.hotRate > 0):
		return c, fmt.Errorf("--hot-read-limit: %v must be > 0", c.hotRate)
	case c.maxApps < 1:
		return c, fmt.Errorf("--max-apps: %d must be >= 1", c.maxApps)
	case c.reportSample < 1:
		return c, fmt.Errorf("--report-sample: %d must be >= 1", c.reportSample)
	}
	c.redisPassword = getenv("HOTSPOT_REDIS_PASSWORD")
	if c.redisTLSCAFile != "" {
		tc, err := kafkaio.ClientTLS(c.redisTLSCAFile, "", "")
		if err != nil {
			return c, fmt.Errorf("--redis-tls-ca: %w", err)
		}
		host, _, _ := net.SplitHostPort(c.redis)
		tc.ServerName = host
		c.redisTLS = tc
	}
	d, err := zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST")
	if err != nil {
		return c, err
	}
	c.zkUser, c.zkPassword = d.User, d.Password
	ks, err := kf.Resolve(getenv)
	if err != nil {
		return c, err
	}
	if ks != nil {
		c.kafkaTLS = ks.TLS
		if ks.SASL != nil {
			c.kafkaSASL = ks.SASL.Name()
			c.kafkaUser = fs.Lookup("kafka-user").Value.String()
			c.kafkaPassword = getenv("HOTSPOT_KAFKA_PASSWORD")
			if f := fs.Lookup("kafka-password-file").Value.String(); f != "" {
				b, err := os.ReadFile(f)
				if err != nil {
					return c, fmt.Errorf("--kafka-password-file: %w", err)
				}
				c.kafkaPassword = strings.TrimRight(string(b), "\r\n")
			}
		}
	}
	return c, nil
}

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotspot-proxy:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("hotspot-proxy", "err", err)
		os.Exit(1)
	}
}

// commandTableWait bounds how long the proxy waits for Redis' COMMAND table
// before it serves: without it nothing is reported or answered from L1.
const commandTableWait = 5 * time.Second

// run serves until ctx ends, then shuts down. It listens at once, but
// accepts connections only once it has the COMMAND table (cfg.commandWait
// at most), so that no command goes unreported. ready, if not nil, gets the
// listening addresses (tests).
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(resp, http string)) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	p, err := newProxy(ctx, cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	if !p.cmds.wait(ctx, cfg.commandWait) && ctx.Err() == nil {
		log.Warn("hotspot-proxy: serving without Redis' COMMAND table: until it is read, commands pass through, unreported, and writes invalidate no hot key",
			"waited", cfg.commandWait)
	}
	var hsrv *http.Server
	httpAddr := ""
	if cfg.http != "" {
		hl, err := net.Listen("tcp", cfg.http)
		if err != nil {
			ln.Close()
			_ = p.shutdown(0)
			return err
		}
		httpAddr = hl.Addr().String()
		hsrv = &http.Server{Handler: p.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hsrv.Serve(hl) }()
	}
	log.Info("hotspot-proxy: serving", "listen", ln.Addr().String(), "http", httpAddr, "redis", p.upstreamName(), "app", cfg.app,
		"instance", p.defaultApp.c.Instance())
	if ready != nil {
		ready(ln.Addr().String(), httpAddr)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- p.serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		log.Error("hotspot-proxy: accept", "err", err)
	}
	ln.Close()
	log.Info("hotspot-proxy: shutting down")
	err = p.shutdown(cfg.shutdownGrace)
	if hsrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = hsrv.Shutdown(sctx)
		cancel()
	}
	return cmp.Or(err, nil)
}
