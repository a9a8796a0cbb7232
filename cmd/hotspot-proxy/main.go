// Command hotspot-proxy is a Redis sidecar: any Redis client points at it
// instead of Redis and gets the hotcache SDK's protection without a line of
// code: hot keys answered from the proxy's L1 within the per-instance
// hot-read limit, every access reported to Hotspot, and writes through it
// invalidating the key in every proxy's and every SDK instance's L1.
// docs/proxy.md is its manual.
package main

import (
	"context"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/proxy"
)

// config is the command line: the proxy's Config and what the command
// does beside it.
type config struct {
	proxy    proxy.Config
	listen   string
	http     string // "" for none
	logLevel slog.Level
}

const proxyHelp = `Redis sidecar proxy: hot keys from the hotcache SDK's L1, accesses reported to Hotspot (docs/proxy.md).`

// rawFlags are the flags whose values parseConfig converts.
type rawFlags struct {
	brokers, zk, logLevel, limited, redisCluster, redisTLSCAFile string
	l1MiB, replyMiB, clientBufMiB, bufMiB                        int64
	redisTracking                                                bool
	kafka                                                        *kafkaio.SecurityFlags
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := envflag.New("hotspot-proxy", "HOTSPOT", proxyHelp)
	var c config
	raw := defineFlags(fs, &c)
	if err := envflag.Parse(fs, "HOTSPOT", args, getenv); err != nil {
		return c, err
	}
	pc := &c.proxy
	pc.Brokers, pc.ZooKeeper = envflag.SplitList(raw.brokers), envflag.SplitList(raw.zk)
	if err := chooseRedis(fs, getenv, pc, raw.redisCluster); err != nil {
		return c, err
	}
	pc.L1Bytes, pc.ReplyCacheBytes = raw.l1MiB<<20, raw.replyMiB<<20
	pc.MaxClientBuffer, pc.MaxBuffer = raw.clientBufMiB<<20, raw.bufMiB<<20
	pc.NoRedisTracking = !raw.redisTracking
	if err := c.logLevel.UnmarshalText([]byte(raw.logLevel)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	switch raw.limited {
	case "null":
	case "error":
		pc.LimitedError = true
	default:
		return c, fmt.Errorf("--limited-reply: %q, want null or error", raw.limited)
	}
	if err := checkFlags(pc); err != nil {
		return c, err
	}
	return c, readSecrets(fs, getenv, pc, raw)
}

// defineFlags defines the flags: those of c directly, the others in the
// rawFlags it returns.
func defineFlags(fs *flag.FlagSet, c *config) *rawFlags {
	var raw rawFlags
	pc := &c.proxy
	fs.StringVar(&c.listen, "listen", "127.0.0.1:6380", "RESP listen address the app's Redis clients connect to")
	fs.StringVar(&c.http, "http", "127.0.0.1:6381", "HTTP listen address: /metrics and /healthz; empty for none")
	fs.StringVar(&pc.Redis, "redis", "127.0.0.1:16379", "the Redis every command is forwarded to (host:port)")
	fs.StringVar(&pc.Upstream, "upstream", proxy.UpstreamDedicated, "how clients' commands reach Redis: dedicated (an upstream connection per client connection, and per master with --redis-cluster) or shared (a few pipelined connections, per master with --redis-cluster, shared by every client until its connection acquires state: SELECT, AUTH, MULTI, blocking commands, Pub/Sub...; CLIENT LIST and CLIENT ID then describe the proxy's connections)")
	fs.IntVar(&pc.UpstreamConns, "upstream-conns", 2, "with --upstream shared: how many shared connections to Redis, or to each master")
	fs.StringVar(&raw.redisCluster, "redis-cluster", "", "seed nodes of a Redis Cluster (host:port, comma-separated) to stand in front of instead of --redis: the proxy shows its clients a one-node cluster and routes each command to its slot's master")
	fs.StringVar(&pc.RedisUser, "redis-user", "", "ACL user of the proxy's own Redis connections (hot-key loads, invalidations; password from HOTSPOT_REDIS_PASSWORD). Clients authenticate themselves")
	fs.StringVar(&raw.redisTLSCAFile, "redis-tls-ca", "", "PEM CA bundle: talk TLS to Redis, verifying it with this CA")
	fs.StringVar(&raw.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap brokers for the access reports, comma-separated; empty reports nothing")
	fs.StringVar(&pc.Topic, "topic", hotset.DefaultTopic, "access-event topic")
	fs.StringVar(&raw.zk, "zk", "127.0.0.1:12181", "ZooKeeper servers to follow the hot set on, comma-separated; empty: nothing is hot")
	fs.StringVar(&pc.ZooKeeperRoot, "zk-root", hotset.DefaultRoot, "ZooKeeper root of everything Hotspot keeps")
	fs.StringVar(&pc.App, "app", "", "the app whose hot set is followed and whose accesses are reported (required; a connection may name another with CLIENT SETNAME app:NAME)")
	fs.IntVar(&pc.ReportSample, "report-sample", 1, "count one read in N, with weight N, to cut what reporting costs this proxy and the broker at high rates; each key's reported rate is then an estimate (writes are always counted)")
	fs.StringVar(&pc.Instance, "instance", "", "this instance's name in the reports (default <host name>/<pid>; give each pod its own, e.g. the pod name)")
	fs.Float64Var(&pc.HotReadLimit, "hot-read-limit", 400, "reads of hot keys per second this instance sends to Redis at most (the SDK's hot-read bucket); past it a read is answered with a blank")
	fs.Int64Var(&raw.l1MiB, "l1-mib", 64, "MiB of hot keys' values in L1 (the SDK's budget)")
	fs.DurationVar(&pc.L1TTL, "l1-ttl", 10*time.Second, "how long a value or reply is served from L1 before it is read again; bounds writes that bypass the proxies where Redis does not track them (--redis-tracking)")
	fs.BoolVar(&raw.redisTracking, "redis-tracking", true, "ask Redis (client tracking) to tell of writes to hot keys that bypass the proxies and the SDK, so they reach L1 within a round trip instead of --l1-ttl (with --redis and --redis-cluster)")
	fs.Int64Var(&raw.replyMiB, "reply-cache-mib", 64, "MiB of cached replies of hot keys (commands other than GET), per app")
	fs.StringVar(&raw.limited, "limited-reply", "null", "reply to a read over the hot-read limit: null, or error (-HOTKEY_LIMITED)")
	fs.Int64Var(&raw.clientBufMiB, "max-client-buffer-mib", 64, "MiB of one client's commands the proxy holds at most (a bigger command is refused and its connection closed; Redis takes arguments up to 512 MB)")
	fs.Int64Var(&raw.bufMiB, "max-buffer-mib", 256, "MiB of every client's commands the proxy holds at most")
	fs.IntVar(&pc.MaxApps, "max-apps", 16, "apps (CLIENT SETNAME app:NAME) followed at most, --app included")
	fs.DurationVar(&pc.ShutdownGrace, "shutdown-grace", 5*time.Second, "on SIGTERM, how long replies of commands already read may take")
	fs.StringVar(&raw.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	raw.kafka = kafkaio.AddSecurityFlags(fs)
	return &raw
}

// chooseRedis sets the Redis or the Redis Cluster: the command line's choice
// wins over the other's variable (a shell may hold both); without one, both
// variables are ambiguous.
func chooseRedis(fs *flag.FlagSet, getenv func(string) string, pc *proxy.Config, redisCluster string) error {
	pc.RedisCluster = envflag.SplitList(redisCluster)
	cmdline := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmdline[f.Name] = true }) // not those set from variables
	switch {
	case cmdline["redis"] && cmdline["redis-cluster"]:
		return errors.New("--redis and --redis-cluster are exclusive")
	case cmdline["redis"]:
		pc.RedisCluster = nil
	case cmdline["redis-cluster"]:
	case len(pc.RedisCluster) > 0 && getenv("HOTSPOT_REDIS") != "":
		return errors.New("HOTSPOT_REDIS and HOTSPOT_REDIS_CLUSTER are both set: choose with --redis or --redis-cluster")
	}
	return nil
}

// checkFlags refuses values the proxy's Config would take as its defaults
// (a zero) or refuse.
func checkFlags(pc *proxy.Config) error {
	switch {
	case pc.App == "":
		return errors.New("--app is required")
	case pc.Redis == "":
		return errors.New("--redis is required")
	case !(pc.HotReadLimit > 0):
		return fmt.Errorf("--hot-read-limit: %v must be > 0", pc.HotReadLimit)
	case pc.MaxApps < 1:
		return fmt.Errorf("--max-apps: %d must be >= 1", pc.MaxApps)
	case pc.ReportSample < 1:
		return fmt.Errorf("--report-sample: %d must be >= 1", pc.ReportSample)
	case pc.MaxClientBuffer < 1<<20 || pc.MaxBuffer < pc.MaxClientBuffer:
		return errors.New("--max-client-buffer-mib must be >= 1 and --max-buffer-mib >= it")
	case pc.Upstream != proxy.UpstreamDedicated && pc.Upstream != proxy.UpstreamShared:
		return fmt.Errorf("--upstream: %q, want %s or %s", pc.Upstream, proxy.UpstreamDedicated, proxy.UpstreamShared)
	case pc.UpstreamConns < 1:
		return fmt.Errorf("--upstream-conns: %d must be >= 1", pc.UpstreamConns)
	}
	return nil
}

// readSecrets reads the passwords from their variables and files, and the
// TLS settings.
func readSecrets(fs *flag.FlagSet, getenv func(string) string, pc *proxy.Config, raw *rawFlags) error {
	pc.RedisPassword = getenv("HOTSPOT_REDIS_PASSWORD")
	if raw.redisTLSCAFile != "" {
		tc, err := kafkaio.ClientTLS(raw.redisTLSCAFile, "", "")
		if err != nil {
			return fmt.Errorf("--redis-tls-ca: %w", err)
		}
		host, _, _ := net.SplitHostPort(pc.Redis)
		tc.ServerName = host
		pc.RedisTLS = tc
	}
	d, err := zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST")
	if err != nil {
		return err
	}
	pc.ZooKeeperUser, pc.ZooKeeperPassword = d.User, d.Password
	ks, err := raw.kafka.Resolve(getenv)
	if err != nil || ks == nil {
		return err
	}
	pc.KafkaTLS = ks.TLS
	if ks.SASL == nil {
		return nil
	}
	pc.KafkaSASL = ks.SASL.Name()
	pc.KafkaUser = fs.Lookup("kafka-user").Value.String()
	pc.KafkaPassword = getenv("HOTSPOT_KAFKA_PASSWORD")
	if f := fs.Lookup("kafka-password-file").Value.String(); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--kafka-password-file: %w", err)
		}
		pc.KafkaPassword = strings.TrimRight(string(b), "\r\n")
	}
	return nil
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

// run serves until ctx ends (SIGTERM), then shuts down: the proxy on its
// listener, /metrics and /healthz on cfg.http. ready, if not nil, gets the
// listening addresses (tests).
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(resp, http string)) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.proxy.Logger, cfg.proxy.Registerer = log, reg
	p, err := proxy.New(cfg.proxy)
	if err != nil {
		ln.Close()
		return err
	}
	httpAddr := ""
	if cfg.http != "" {
		hl, err := net.Listen("tcp", cfg.http)
		if err != nil {
			ln.Close()
			return errors.Join(err, p.Close())
		}
		httpAddr = hl.Addr().String()
		hsrv := &http.Server{Handler: httpHandler(p, reg), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() { defer close(served); _ = hsrv.Serve(hl) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = hsrv.Shutdown(sctx)
			cancel()
			<-served
		}()
		log.Info("hotspot-proxy: HTTP", "http", httpAddr)
	}
	if ready != nil {
		ready(ln.Addr().String(), httpAddr)
	}
	return p.Serve(ctx, ln)
}

// httpHandler serves /metrics and /healthz.
func httpHandler(p *proxy.Proxy, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
