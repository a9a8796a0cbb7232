package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4/resp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// respOpts wraps radix's options for RawMessage.
type respOpts struct{ o *resp.Opts }

var p3opts = &respOpts{o: resp.NewOpts()}

// appClient is one app's SDK Client and reply cache.
type appClient struct {
	name    string
	c       *hotcache.Client
	replies *hotcache.ReplyCache
}

// stats are the proxy's own counts (HOTSPOT INFO, /metrics). The counts of
// commands are striped: each session adds to one stripe, so that sessions
// on different cores rarely write the same cache line for every command.
type stats struct {
	stripes     [statStripes]counts
	next        atomic.Uint32 // the stripe of the next session
	bcastFailed atomic.Uint64
	conns       atomic.Int64
}

const statStripes = 8

// counts are a stripe of the command counts, a cache line of its own.
type counts struct {
	hits, misses, limited, passthrough atomic.Uint64
	_                                  [32]byte
}

// stripe returns the counts a new session adds to.
func (s *stats) stripe() *counts { return &s.stripes[s.next.Add(1)%statStripes] }

// totals are the command counts of every stripe added up.
type totals struct{ hits, misses, limited, passthrough uint64 }

func (s *stats) sum() totals {
	var t totals
	for i := range s.stripes {
		c := &s.stripes[i]
		t.hits += c.hits.Load()
		t.misses += c.misses.Load()
		t.limited += c.limited.Load()
		t.passthrough += c.passthrough.Load()
	}
	return t
}

func (c *counts) count(hs hotcache.HotState) {
	switch hs {
	case hotcache.HotHit:
		c.hits.Add(1)
	case hotcache.HotMiss:
		c.misses.Add(1)
	case hotcache.HotLimited:
		c.limited.Add(1)
	}
}

// Proxy is a RESP proxy in front of one Redis, with the SDK's L1.
type Proxy struct {
	cfg   config
	log   *slog.Logger
	reg   *prometheus.Registry
	rdb   redis.UniversalClient // the SDK Clients' Redis (single mode), COMMAND, /healthz
	cmds  *commands
	stats stats

	defaultApp *appClient
	appsMu     sync.Mutex
	apps       map[string]*appClient

	sessMu   sync.Mutex
	sessions map[clientConn]struct{} // nil once shutting down
	cluster  *clusterMap             // cluster mode: the slot table (nil: single mode)
	wg       sync.WaitGroup

	bcast chan bcastReq
	bg    context.Context
	stop  context.CancelFunc
}

type bcastReq struct {
	app *appClient
	key string
}

// newProxy connects the default app's Client and starts loading the command
// table; it does not listen yet.
func newProxy(ctx context.Context, cfg config, log *slog.Logger) (*Proxy, error) {
	p := &Proxy{cfg: cfg, log: log, reg: prometheus.NewRegistry(), apps: map[string]*appClient{},
		sessions: map[clientConn]struct{}{}, bcast: make(chan bcastReq, 10_000), cmds: newCommands()}
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.registerMetrics()
	p.bg, p.stop = context.WithCancel(context.Background())
	if len(cfg.redisCluster) > 0 {
		p.startCluster()
	} else {
		p.rdb = redis.NewClient(&redis.Options{
			Addr: cfg.redis, Username: cfg.redisUser, Password: cfg.redisPassword, TLSConfig: cfg.redisTLS,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
			PoolTimeout: 250 * time.Millisecond, MaxRetries: -1,
		})
	}
	go p.cmds.load(p.bg, p.rdb, func(err error) {
		log.Warn("hotspot-proxy: COMMAND table not read yet; commands pass through", "err", err)
	})
	a, err := p.newApp(ctx, cfg.app)
	if err != nil {
		return nil, err
	}
	p.defaultApp = a
	p.apps[cfg.app] = a
	for range 4 {
		go p.broadcaster()
	}
	go p.sweeper()
	return p, nil
}

func (p *Proxy) newApp(ctx context.Context, name string) (*appClient, error) {
	cfg := p.cfg
	opts := []hotcache.Option{
		hotcache.WithApp(name),
		hotcache.WithInstanceID(cfg.instance),
		hotcache.WithHotReadLimit(hotcache.Rate(cfg.hotRate)),
		hotcache.WithL1(cfg.l1Bytes, cfg.l1TTL),
		hotcache.WithReporting(0, 0, cfg.reportSample),
		hotcache.WithRedisTracking(cfg.redisTracking),
		hotcache.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"app": name}, p.reg)),
		hotcache.WithLogger(p.log),
	}
	opts = append(opts, p.redisOptions()...)
	if len(cfg.zk) > 0 {
		opts = append(opts, hotcache.WithZooKeeper(cfg.zk, cfg.zkRoot))
		if cfg.zkUser != "" {
			opts = append(opts, hotcache.WithZooKeeperAuth(cfg.zkUser, cfg.zkPassword))
		}
	}
	if len(cfg.brokers) > 0 {
		opts = append(opts, hotcache.WithKafka(cfg.brokers, cfg.topic))
		if cfg.kafkaTLS != nil {
			opts = append(opts, hotcache.WithKafkaTLS(cfg.kafkaTLS))
		}
		if cfg.kafkaSASL != "" {
			opts = append(opts, hotcache.WithKafkaSASL(cfg.kafkaSASL, cfg.kafkaUser, cfg.kafkaPassword))
		}
	}
	c, err := hotcache.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("app %q: %w", name, err)
	}
	return &appClient{name: name, c: c, replies: c.NewReplyCache(cfg.replyBytes)}, nil
}

// appFor returns the Client of app name, started on first use; past
// --max-apps it returns nil (the connection keeps its app).
func (p *Proxy) appFor(name string) *appClient {
	p.appsMu.Lock()
	defer p.appsMu.Unlock()
	if a := p.apps[name]; a != nil {
		return a
	}
	if len(p.apps) >= p.cfg.maxApps {
		p.log.Warn("hotspot-proxy: --max-apps reached; connection keeps its app", "app", name)
		return nil
	}
	ctx, cancel := context.WithTimeout(p.bg, time.Second)
	defer cancel()
	a, err := p.newApp(ctx, name)
	if err != nil {
		p.log.Warn("hotspot-proxy: app Client", "app", name, "err", err)
		return nil
	}
	p.apps[name] = a
	return a
}

// broadcast hands a hot key written through this proxy to the broadcasters.
func (p *Proxy) broadcast(a *appClient, key string) {
	select {
	case p.bcast <- bcastReq{a, key}:
	default:
		p.stats.bcastFailed.Add(1)
		p.log.Warn("hotspot-proxy: invalidation queue full; other instances keep the key up to the L1 TTL", "key", key)
	}
}

func (p *Proxy) broadcaster() {
	for {
		select {
		case <-p.bg.Done():
			return
		case r := <-p.bcast:
			p.broadcastNow(r.app, r.key)
		}
	}
}

// broadcastNow broadcasts a hot key written through this proxy and waits
// for it (a second at most).
func (p *Proxy) broadcastNow(a *appClient, key string) {
	ctx, cancel := context.WithTimeout(p.bg, time.Second)
	defer cancel()
	if err := a.c.Broadcast(ctx, key); err != nil {
		p.stats.bcastFailed.Add(1)
		p.log.Warn("hotspot-proxy: invalidation broadcast failed; other instances keep the key up to the L1 TTL", "key", key, "err", err)
	}
}

func (p *Proxy) sweeper() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.bg.Done():
			return
		case <-t.C:
			p.appsMu.Lock()
			for _, a := range p.apps {
				a.replies.Sweep()
			}
			p.appsMu.Unlock()
		}
	}
}

// serve accepts client connections until ln is closed.
func (p *Proxy) serve(ln net.Listener) error {
	for {
		cc, err := ln.Accept()
		if err != nil {
			return err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handleConn(cc)
		}()
	}
}

func (p *Proxy) dialUpstream() (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	uc, err := d.Dial("tcp", p.cfg.redis)
	if err != nil {
		return nil, err
	}
	if p.cfg.redisTLS != nil {
		return tls.Client(uc, p.cfg.redisTLS), nil
	}
	return uc, nil
}

func (p *Proxy) handleConn(cc net.Conn) {
	if p.cluster != nil {
		p.handleClusterConn(cc)
		return
	}
	uc, err := p.dialUpstream()
	if err != nil {
		// Redis is not there: say so to the first command, and close.
		p.log.Debug("hotspot-proxy: upstream", "err", err)
		_, _ = cc.Write([]byte("-ERR hotspot-proxy: Redis unavailable\r\n"))
		cc.Close()
		return
	}
	p.track(newSession(p, cc, uc, p.defaultApp), func() { cc.Close(); uc.Close() })
}

// clientConn is a client connection being served: a session, or a
// clusterSession in cluster mode.
type clientConn interface {
	run()
	shutdown(grace time.Duration)
}

// track runs c until it ends, unless the proxy is shutting down: then it
// calls refused, which closes what c holds.
func (p *Proxy) track(c clientConn, refused func()) {
	p.sessMu.Lock()
	if p.sessions == nil {
		p.sessMu.Unlock()
		refused()
		return
	}
	p.sessions[c] = struct{}{}
	p.sessMu.Unlock()
	p.stats.conns.Add(1)
	c.run()
	p.stats.conns.Add(-1)
	p.sessMu.Lock()
	delete(p.sessions, c)
	p.sessMu.Unlock()
}

// shutdown stops every session (replies of commands already read are still
// written, within grace), then closes the Clients, flushing their reports.
func (p *Proxy) shutdown(grace time.Duration) error {
	p.sessMu.Lock()
	for s := range p.sessions {
		s.shutdown(grace)
	}
	p.sessions = nil
	p.sessMu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace + time.Second):
		p.log.Warn("hotspot-proxy: connections still open after the grace period")
	}
	p.stop()
	var errs []string
	p.appsMu.Lock()
	for _, a := range p.apps {
		if err := a.c.Close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	p.appsMu.Unlock()
	p.rdb.Close()
	if len(errs) > 0 {
		return fmt.Errorf("closing: %s", strings.Join(errs, "; "))
	}
	return nil
}

// blank is the reply to a read the hot-read limit refused.
func (p *Proxy) blank(proto int) []byte {
	if p.cfg.limitedError {
		return []byte("-HOTKEY_LIMITED hotspot-proxy: hot key read over this instance's limit\r\n")
	}
	return p.null(proto)
}

func (p *Proxy) null(proto int) []byte {
	if proto >= 3 {
		return []byte("_\r\n")
	}
	return []byte("$-1\r\n")
}

// hotspotCommand answers HOTSPOT INFO and HOTSPOT KEYS.
func (p *Proxy) hotspotCommand(a *appClient, args [][]byte) []byte {
	if len(args) != 2 {
		return []byte("-ERR wrong number of arguments for 'hotspot' command\r\n")
	}
	switch strings.ToLower(string(args[1])) {
	case "info":
		return redcon.AppendBulkString(nil, p.info(a))
	case "keys":
		hot := a.c.Hot()
		b := redcon.AppendArray(nil, len(hot))
		for _, h := range hot {
			b = redcon.AppendBulkString(b, h.Key)
		}
		return b
	}
	return []byte("-ERR unknown HOTSPOT subcommand (INFO, KEYS)\r\n")
}

func (p *Proxy) info(a *appClient) string {
	s := &p.stats
	t := s.sum()
	ratio := 0.0
	if n := t.hits + t.misses + t.limited; n > 0 {
		ratio = float64(t.hits) / float64(n)
	}
	rs := a.replies.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "# Hotspot proxy\r\napp:%s\r\ninstance:%s\r\nupstream:%s\r\n", a.name, a.c.Instance(), p.upstreamName())
	fmt.Fprintf(&b, "hits:%d\r\nmisses:%d\r\nlimited:%d\r\npassthrough:%d\r\nhit_ratio:%s\r\n",
		t.hits, t.misses, t.limited, t.passthrough, strconv.FormatFloat(ratio, 'f', 4, 64))
	fmt.Fprintf(&b, "hot_keys:%d\r\nreply_cache_keys:%d\r\nreply_cache_bytes:%d\r\nconnections:%d\r\nbroadcasts_failed:%d\r\ncommand_table:%d\r\n",
		len(a.c.Hot()), rs.Keys, rs.Bytes, s.conns.Load(), s.bcastFailed.Load(), p.cmds.has())
	return b.String()
}

func (p *Proxy) registerMetrics() {
	s := &p.stats
	counter := func(name, help string, f func() float64) {
		p.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hotspot_proxy_" + name, Help: help}, f))
	}
	counter("l1_hits_total", "Reads of hot keys answered from L1.", func() float64 { return float64(s.sum().hits) })
	counter("l1_misses_total", "Reads of hot keys that L1 could not answer (read from Redis).", func() float64 { return float64(s.sum().misses) })
	counter("limited_total", "Reads of hot keys refused by the hot-read limit (answered with a blank).", func() float64 { return float64(s.sum().limited) })
	counter("passthrough_total", "Commands forwarded that L1 could not answer (not hot, not cacheable, MULTI, WATCH, another database...).", func() float64 { return float64(s.sum().passthrough) })
	counter("broadcasts_failed_total", "Invalidations of hot keys written through the proxy that could not be broadcast.", func() float64 { return float64(s.bcastFailed.Load()) })
	p.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotspot_proxy_connections", Help: "Client connections open."},
		func() float64 { return float64(s.conns.Load()) }))
	p.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotspot_proxy_command_table",
		Help: "1 once Redis' COMMAND table is read; 0 while every command passes through unreported."},
		func() float64 { return float64(p.cmds.has()) }))
}

// httpHandler serves /metrics and /healthz.
func (p *Proxy) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := p.rdb.Ping(ctx).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
