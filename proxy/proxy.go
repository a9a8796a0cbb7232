package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4/resp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
	"golang.org/x/sync/errgroup"

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
	owned       atomic.Uint64 // shared mode: sessions moved to an upstream connection of their own
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

// Proxy is a RESP proxy in front of one Redis or a Redis Cluster, with the
// SDK's L1. Make one with New, serve with Serve.
type Proxy struct {
	cfg   Config
	log   *slog.Logger
	reg   prometheus.Registerer
	rdb   redis.UniversalClient // the SDK Clients' Redis (single mode), COMMAND, Ping
	cmds  *commands
	stats stats
	mem   memBudget // every client's commands held, bounded by Config.MaxBuffer

	metrics []prometheus.Collector // the proxy's own, registered in New

	defaultApp *appClient
	appsMu     sync.Mutex
	apps       map[string]*appClient

	sessMu   sync.Mutex
	sessions map[clientConn]struct{} // nil once shutting down
	sessWG   sync.WaitGroup          // the sessions' goroutines (also in Serve's group): shutdown waits for them, grace at most
	cluster  *clusterMap             // cluster mode: the slot table (nil: single mode)
	shared   *sharedPool             // single mode, Config.Upstream "shared": the shared upstream connections (nil: dedicated)

	bcast     chan bcastReq
	bg        context.Context // ends when the proxy stops: the background goroutines' and new apps' context
	stop      context.CancelFunc
	served    atomic.Bool
	serving   chan struct{} // closed once Serve accepts connections (tests)
	closeOnce sync.Once
	closeErr  error
}

type bcastReq struct {
	app *appClient
	key string
}

// New checks cfg, connects the Redis client the SDK uses and starts the
// default app's SDK Client; it starts no goroutine of its own (Serve does).
// If it fails, everything it made is closed.
func New(cfg Config) (*Proxy, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, reg: cfg.Registerer, apps: map[string]*appClient{},
		sessions: map[clientConn]struct{}{}, bcast: make(chan bcastReq, 10_000), cmds: newCommands(),
		serving: make(chan struct{})}
	p.mem.max = cfg.MaxBuffer
	if err := p.registerMetrics(); err != nil {
		return nil, err
	}
	p.bg, p.stop = context.WithCancel(context.Background())
	if len(cfg.RedisCluster) > 0 {
		p.startCluster()
	} else {
		p.rdb = redis.NewClient(p.ownOptions(cfg.Redis))
		if cfg.Upstream == UpstreamShared {
			p.shared = newSharedPool(cfg.UpstreamConns, p.dialUpstream)
		}
	}
	ctx, cancel := context.WithTimeout(p.bg, 10*time.Second)
	defer cancel()
	a, err := p.newApp(ctx, cfg.App)
	if err != nil {
		p.stop()
		p.rdb.Close()
		for _, c := range p.metrics {
			p.reg.Unregister(c)
		}
		return nil, err
	}
	p.defaultApp = a
	p.apps[cfg.App] = a
	return p, nil
}

// ownOptions are the options of the proxy's own connections to addr (the
// SDK's pool, its subscriptions and client tracking, COMMAND): few, named
// ownName, in RESP2 (go-redis's HELLO 2, without HELLO 3 or CLIENT SETINFO).
func (p *Proxy) ownOptions(addr string) *redis.Options {
	cfg := p.cfg
	return &redis.Options{
		Addr: addr, Username: cfg.RedisUser, Password: cfg.RedisPassword, TLSConfig: cfg.RedisTLS,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
		PoolTimeout: 250 * time.Millisecond, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true, PoolSize: ownPoolSize, OnConnect: nameOwn,
	}
}

const (
	// ownName names the proxy's own connections in CLIENT LIST.
	ownName = "hotspot-proxy"
	// ownPoolSize bounds the connections of the SDK's pool (hot keys'
	// loads, invalidations), per Redis node.
	ownPoolSize = 4
)

// nameOwn names a connection of the proxy's own. It is the connections'
// OnConnect, which the SDK copies to its client tracking connections too.
func nameOwn(ctx context.Context, cn *redis.Conn) error {
	return cn.ClientSetName(ctx, ownName).Err()
}

// Serve accepts client connections on ln and serves them until ctx ends or
// ln fails; then it stops reading commands, lets the replies of those
// already read be written (Config.ShutdownGrace at most), stops every
// goroutine it started, closes ln and the SDK Clients (flushing their
// reports) and returns. It accepts connections only once it has Redis'
// COMMAND table (Config.CommandTableWait at most), so that no command goes
// unreported. Serve may be called once; the Proxy is closed when it returns.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if !p.served.CompareAndSwap(false, true) {
		ln.Close()
		return errors.New("proxy: Serve after Serve or Close")
	}
	var g errgroup.Group
	g.Go(func() error {
		p.cmds.load(p.bg, p.rdb, func(err error) {
			p.log.Warn("hotspot-proxy: COMMAND table not read yet; commands pass through", "err", err)
		})
		return nil
	})
	if p.cluster != nil {
		g.Go(func() error { p.cluster.run(p.bg); return nil })
	}
	for range 4 {
		g.Go(func() error { p.broadcaster(); return nil })
	}
	g.Go(func() error { p.sweeper(); return nil })

	if !p.cmds.wait(ctx, p.cfg.CommandTableWait) && ctx.Err() == nil {
		p.log.Warn("hotspot-proxy: serving without Redis' COMMAND table: until it is read, commands pass through, unreported, and writes invalidate no hot key",
			"waited", p.cfg.CommandTableWait)
	}
	p.log.Info("hotspot-proxy: serving", "listen", ln.Addr().String(), "redis", p.upstreamName(), "app", p.cfg.App,
		"instance", p.defaultApp.c.Instance())
	acceptErr := make(chan error, 1)
	g.Go(func() error { acceptErr <- p.accept(&g, ln); return nil })
	close(p.serving)
	var err error
	select {
	case <-ctx.Done():
	case err = <-acceptErr:
		p.log.Error("hotspot-proxy: accept", "err", err)
	}
	ln.Close()
	p.log.Info("hotspot-proxy: shutting down")
	p.shutdown(p.cfg.ShutdownGrace)
	if p.shared != nil { // after the sessions: their replies had the grace
		p.shared.close()
	}
	if p.cluster != nil {
		p.cluster.closeShared()
	}
	p.stop()
	_ = g.Wait()
	if cerr := p.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// Close closes the SDK Clients (flushing their reports) and the proxy's
// Redis client. Serve calls it as it returns; call it for a Proxy that is
// never served. Later calls return the first call's error.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.served.Store(true) // no Serve from now on
		p.stop()
		var errs []error
		p.appsMu.Lock()
		for _, a := range p.apps {
			if err := a.c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		p.appsMu.Unlock()
		p.rdb.Close()
		if len(errs) > 0 {
			p.closeErr = fmt.Errorf("proxy: closing: %w", errors.Join(errs...))
		}
	})
	return p.closeErr
}

// Ping reports whether Redis answers a PING (/healthz).
func (p *Proxy) Ping(ctx context.Context) error { return p.rdb.Ping(ctx).Err() }

func (p *Proxy) newApp(ctx context.Context, name string) (*appClient, error) {
	cfg := p.cfg
	opts := []hotcache.Option{
		hotcache.WithApp(name),
		hotcache.WithInstanceID(cfg.Instance),
		hotcache.WithHotReadLimit(hotcache.Rate(cfg.HotReadLimit)),
		hotcache.WithL1(cfg.L1Bytes, cfg.L1TTL),
		hotcache.WithReporting(0, 0, cfg.ReportSample),
		hotcache.WithRedisTracking(!cfg.NoRedisTracking),
		hotcache.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"app": name}, p.reg)),
		hotcache.WithLogger(p.log),
	}
	opts = append(opts, p.redisOptions()...)
	if len(cfg.ZooKeeper) > 0 {
		opts = append(opts, hotcache.WithZooKeeper(cfg.ZooKeeper, cfg.ZooKeeperRoot))
		if cfg.ZooKeeperUser != "" {
			opts = append(opts, hotcache.WithZooKeeperAuth(cfg.ZooKeeperUser, cfg.ZooKeeperPassword))
		}
	}
	if len(cfg.Brokers) > 0 {
		opts = append(opts, hotcache.WithKafka(cfg.Brokers, cfg.Topic))
		if cfg.KafkaTLS != nil {
			opts = append(opts, hotcache.WithKafkaTLS(cfg.KafkaTLS))
		}
		if cfg.KafkaSASL != "" {
			opts = append(opts, hotcache.WithKafkaSASL(cfg.KafkaSASL, cfg.KafkaUser, cfg.KafkaPassword))
		}
	}
	c, err := hotcache.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("app %q: %w", name, err)
	}
	return &appClient{name: name, c: c, replies: c.NewReplyCache(cfg.ReplyCacheBytes)}, nil
}

// appFor returns the Client of app name, started on first use; past
// --max-apps it returns nil (the connection keeps its app).
func (p *Proxy) appFor(name string) *appClient {
	p.appsMu.Lock()
	defer p.appsMu.Unlock()
	if a := p.apps[name]; a != nil {
		return a
	}
	if len(p.apps) >= p.cfg.MaxApps {
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

// accept accepts client connections until ln is closed; each is served in
// a goroutine of g.
func (p *Proxy) accept(g *errgroup.Group, ln net.Listener) error {
	for {
		cc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p.sessWG.Add(1)
		g.Go(func() error {
			defer p.sessWG.Done()
			p.handleConn(cc)
			return nil
		})
	}
}

func (p *Proxy) dialUpstream() (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	uc, err := d.Dial("tcp", p.cfg.Redis)
	if err != nil {
		return nil, err
	}
	if p.cfg.RedisTLS != nil {
		return tls.Client(uc, p.cfg.RedisTLS), nil
	}
	return uc, nil
}

func (p *Proxy) handleConn(cc net.Conn) {
	if p.cluster != nil {
		p.handleClusterConn(cc)
		return
	}
	if p.shared != nil {
		slot := p.shared.pick()
		sh, err := p.shared.conn(slot)
		if err != nil {
			p.unavailable(cc, err)
			return
		}
		p.track(newSession(p, cc, nil, sh, slot, p.defaultApp), func() { cc.Close() })
		return
	}
	uc, err := p.dialUpstream()
	if err != nil {
		p.unavailable(cc, err)
		return
	}
	p.track(newSession(p, cc, uc, nil, 0, p.defaultApp), func() { cc.Close(); uc.Close() })
}

// unavailable tells a client that connected while Redis cannot be reached
// so, at its first command, and closes its connection.
func (p *Proxy) unavailable(cc net.Conn, err error) {
	p.log.Debug("hotspot-proxy: upstream", "err", err)
	_, _ = cc.Write(errUnavailable)
	cc.Close()
}

// clientConn is a client connection being served: a session, or a
// clusterSession in cluster mode.
type clientConn interface {
	run()
	// shutdown stops reading commands; the replies of those already read
	// have grace to be written.
	shutdown(grace time.Duration)
	// kill closes every connection the session holds, at once.
	kill()
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

// shutdown stops every session: replies of commands already read are still
// written, within grace; past grace (and a second) what is left is closed.
// It returns once every session's goroutines have ended.
func (p *Proxy) shutdown(grace time.Duration) {
	p.sessMu.Lock()
	open := p.sessions
	for s := range open {
		s.shutdown(grace)
	}
	p.sessions = nil
	p.sessMu.Unlock()
	done := make(chan struct{})
	go func() { p.sessWG.Wait(); close(done) }()
	t := time.NewTimer(grace + time.Second)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	p.log.Warn("hotspot-proxy: connections still open after the grace period: closed")
	for s := range open { // track no longer deletes: the map is p's no more
		s.kill()
	}
	<-done
}

// blank is the reply to a read the hot-read limit refused.
func (p *Proxy) blank(proto int) []byte {
	if p.cfg.LimitedError {
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

func (p *Proxy) registerMetrics() error {
	s := &p.stats
	var cs []prometheus.Collector
	counter := func(name, help string, f func() float64) {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hotspot_proxy_" + name, Help: help}, f))
	}
	counter("l1_hits_total", "Reads of hot keys answered from L1.", func() float64 { return float64(s.sum().hits) })
	counter("l1_misses_total", "Reads of hot keys that L1 could not answer (read from Redis).", func() float64 { return float64(s.sum().misses) })
	counter("limited_total", "Reads of hot keys refused by the hot-read limit (answered with a blank).", func() float64 { return float64(s.sum().limited) })
	counter("passthrough_total", "Commands forwarded that L1 could not answer (not hot, not cacheable, MULTI, WATCH, another database...).", func() float64 { return float64(s.sum().passthrough) })
	counter("broadcasts_failed_total", "Invalidations of hot keys written through the proxy that could not be broadcast.", func() float64 { return float64(s.bcastFailed.Load()) })
	counter("buffer_refused_total", "Client connections closed because a command would pass the buffer bounds (MaxClientBuffer, MaxBuffer).",
		func() float64 { return float64(p.mem.refused.Load()) })
	counter("dedicated_upstreams_total", "With shared upstream connections: client connections moved to an upstream connection of their own (connection state, blocking, Pub/Sub...).",
		func() float64 { return float64(s.owned.Load()) })
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotspot_proxy_connections", Help: "Client connections open."},
		func() float64 { return float64(s.conns.Load()) }))
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotspot_proxy_buffered_bytes",
		Help: "Bytes of clients' commands the proxy holds: being read, or kept until their replies (bounded by MaxBuffer)."},
		func() float64 { return float64(p.mem.used.Load()) }))
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotspot_proxy_command_table",
		Help: "1 once Redis' COMMAND table is read; 0 while every command passes through unreported."},
		func() float64 { return float64(p.cmds.has()) }))
	for _, c := range cs {
		if err := p.reg.Register(c); err != nil {
			for _, c := range p.metrics {
				p.reg.Unregister(c)
			}
			return fmt.Errorf("proxy: metrics: %w", err)
		}
		p.metrics = append(p.metrics, c)
	}
	return nil
}
