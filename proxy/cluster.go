package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// Cluster mode (--redis-cluster): the proxy stands in front of a Redis
// Cluster and shows its clients a cluster of one node, itself, owning every
// slot. Each command goes to the master of its keys' slot (clustersession.go);
// the slot table is the proxy's, shared by every session, read with CLUSTER
// SLOTS from any node that answers.

const numSlots = 16384

// noOwner marks a slot no master owns in the table.
const noOwner = 0xFFFF

// slotTable maps each slot to its master's address (an index in masters).
type slotTable struct {
	owner   [numSlots]uint16
	masters []string
}

func (t *slotTable) addr(slot int) string {
	if i := t.owner[slot]; i != noOwner {
		return t.masters[i]
	}
	return ""
}

// clusterMap is the proxy's slot table, refreshed on MOVED, on an upstream
// failure (both at most every refreshGap) and every refreshEvery.
type clusterMap struct {
	seeds []string
	user  string
	pass  string
	tls   *tls.Config
	myID  string // the proxy's node ID, 40 hex digits
	log   func(msg string, args ...any)
	t     atomic.Pointer[slotTable]
	mu    sync.Mutex // one refresh at a time; last
	last  time.Time
	kick  chan struct{}
	rr    atomic.Uint32 // home node round robin

	// With Config.Upstream "shared": UpstreamConns connections per master,
	// shared by the sessions (sharedPool), dialled when first needed.
	conns  int // 0: every session has its own connections
	pmu    sync.Mutex
	pools  map[string]*sharedPool // by master address
	closed bool                   // closeShared ran: no pool is made any more
}

const (
	refreshGap   = 150 * time.Millisecond
	refreshEvery = 10 * time.Second
)

func newClusterMap(cfg Config, log func(string, ...any)) *clusterMap {
	var id [20]byte
	_, _ = rand.Read(id[:])
	m := &clusterMap{seeds: cfg.RedisCluster, user: cfg.RedisUser, pass: cfg.RedisPassword, tls: cfg.RedisTLS,
		myID: hex.EncodeToString(id[:]), log: log, kick: make(chan struct{}, 1), pools: map[string]*sharedPool{}}
	if cfg.Upstream == UpstreamShared {
		m.conns = cfg.UpstreamConns
	}
	t := &slotTable{}
	for i := range t.owner {
		t.owner[i] = noOwner
	}
	m.t.Store(t)
	return m
}

// run refreshes the table on request and periodically until ctx ends.
func (m *clusterMap) run(ctx context.Context) {
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.kick:
		}
		m.refresh(ctx, false)
	}
}

// stale asks for a refresh in the background (MOVED, a failed upstream).
func (m *clusterMap) stale() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// refresh reads CLUSTER SLOTS from the first node that answers: the known
// masters, then the seeds. Unless force, not within refreshGap of the last.
func (m *clusterMap) refresh(ctx context.Context, force bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force && time.Since(m.last) < refreshGap {
		return nil
	}
	if wait := refreshGap - time.Since(m.last); force && wait > 0 {
		time.Sleep(wait)
	}
	m.last = time.Now()
	var errs []error
	for _, addr := range slices.Compact(append(slices.Clone(m.t.Load().masters), m.seeds...)) {
		t, err := m.read(ctx, addr)
		if err == nil {
			m.t.Store(t)
			return nil
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	m.log("hotspot-proxy: Redis Cluster slot table not refreshed", "err", err)
	return err
}

func (m *clusterMap) read(ctx context.Context, addr string) (*slotTable, error) {
	o := &redis.Options{Addr: addr, Username: m.user, Password: m.pass, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		Protocol: 2, DisableIdentity: true, ClientName: ownName}
	if m.tls != nil {
		o.TLSConfig = m.tlsFor(addr)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	//lint:ignore SA1019 CLUSTER SLOTS, unlike CLUSTER SHARDS, works before Redis 7 too
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	t := &slotTable{}
	for i := range t.owner {
		t.owner[i] = noOwner
	}
	for _, r := range ranges {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= numSlots {
			continue
		}
		a := r.Nodes[0].Addr
		if h, port, err := net.SplitHostPort(a); err == nil && h == "" { // "the node you asked"
			ah, _, _ := net.SplitHostPort(addr)
			a = net.JoinHostPort(ah, port)
		}
		i := slices.Index(t.masters, a)
		if i < 0 {
			i = len(t.masters)
			t.masters = append(t.masters, a)
		}
		for s := r.Start; s <= r.End; s++ {
			t.owner[s] = uint16(i)
		}
	}
	if len(t.masters) == 0 {
		return nil, errors.New(addr + ": CLUSTER SLOTS: no slot assigned")
	}
	return t, nil
}

// moved records a MOVED redirection at once (the refresh that follows
// confirms the rest of the table).
func (m *clusterMap) moved(slot int, addr string) {
	m.mu.Lock()
	old := m.t.Load()
	if old.addr(slot) != addr {
		t := &slotTable{owner: old.owner, masters: old.masters}
		i := slices.Index(t.masters, addr)
		if i < 0 {
			t.masters = append(slices.Clone(t.masters), addr)
			i = len(t.masters) - 1
		}
		t.owner[slot] = uint16(i)
		m.t.Store(t)
	}
	m.mu.Unlock()
	m.stale()
}

// owner returns the master of slot ("" if none is known).
func (m *clusterMap) owner(slot int) string { return m.t.Load().addr(slot) }

// home picks a master for a new session's keyless commands.
func (m *clusterMap) home() string {
	t := m.t.Load()
	if len(t.masters) == 0 {
		return ""
	}
	return t.masters[int(m.rr.Add(1))%len(t.masters)]
}

func (m *clusterMap) tlsFor(addr string) *tls.Config {
	c := m.tls.Clone()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = h
	}
	return c
}

// dial opens a connection to a node.
func (m *clusterMap) dial(addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if m.tls != nil {
		return tls.Client(c, m.tlsFor(addr)), nil
	}
	return c, nil
}

// sharedPool returns the shared connections to the master at addr, made
// when first asked for; nil without shared connections or once
// closeShared ran.
func (m *clusterMap) sharedPool(addr string) *sharedPool {
	if m.conns == 0 {
		return nil
	}
	m.pmu.Lock()
	defer m.pmu.Unlock()
	if m.closed {
		return nil
	}
	sp := m.pools[addr]
	if sp == nil {
		sp = newSharedPool(m.conns, func() (net.Conn, error) { return m.dial(addr) })
		m.pools[addr] = sp
	}
	return sp
}

// closeShared closes every master's shared connections; their commands not
// answered fail. The proxy calls it once the sessions have ended.
func (m *clusterMap) closeShared() {
	m.pmu.Lock()
	m.closed = true
	pools := m.pools
	m.pools = nil
	m.pmu.Unlock()
	for _, sp := range pools {
		sp.close()
	}
}

// startCluster sets the proxy up for cluster mode: the slot table (read now
// if the cluster answers, else by clusterMap.run, which Serve starts) and a
// ClusterClient for COMMAND and Ping.
func (p *Proxy) startCluster() {
	cfg := p.cfg
	p.cluster = newClusterMap(cfg, p.log.Warn)
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cfg.RedisCluster, Username: cfg.RedisUser, Password: cfg.RedisPassword, TLSConfig: cfg.RedisTLS,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
		PoolTimeout: 250 * time.Millisecond, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true, PoolSize: ownPoolSize, OnConnect: nameOwn,
	})
	p.rdb = cc
	ctx, cancel := context.WithTimeout(p.bg, 3*time.Second)
	_ = p.cluster.refresh(ctx, true)
	cancel()
}

// redisOptions is how the SDK Clients reach Redis: through the proxy's own
// client. On one server the SDK tracks the hot keys it reads
// (--redis-tracking); on a cluster it spreads hot keys' copies over the
// masters (WithRedisClient with a ClusterClient), and Broadcast deletes those
// copies before it publishes.
func (p *Proxy) redisOptions() []hotcache.Option {
	return []hotcache.Option{hotcache.WithRedisClient(p.rdb)}
}

// keySlot is the Redis Cluster hash slot of key (hash tags included).
func keySlot(key []byte) int { return int(radix.ClusterSlot(key)) }

// nodeID is the ID of the proxy's virtual node i (clusterreplies.go).
func (m *clusterMap) nodeID(i int) string {
	return m.myID[:39] + strconv.Itoa(i)
}

// upstreamName is the upstream shown by HOTSPOT INFO and the log.
func (p *Proxy) upstreamName() string {
	if len(p.cfg.RedisCluster) > 0 {
		return "cluster:" + strings.Join(p.cfg.RedisCluster, ",")
	}
	return p.cfg.Redis
}
