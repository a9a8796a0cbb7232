package hotcache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Client tracking on a Redis Cluster.
//
// The redirect of CLIENT TRACKING must name a connection on the server that
// holds the key, so on a cluster the Client keeps one tracking connection
// per master (a tracking, as with one server), made when a hot key of that
// master is first loaded, and subscribed to __redis__:invalidate there.
//
// A hot key is read from its copies on distinct masters (hot-key replicas,
// rediscluster.go), which nobody else writes; what a write past Hotspot
// changes is the untagged key, the copy of record. So each load of a hot
// key first asks the record's master to track it for this Client: CLIENT
// TRACKING ON REDIRECT <that master's tracking connection> OPTIN, CLIENT
// CACHING YES and EXISTS of the record, in one round trip. Then it reads a
// copy as before. When the record changes, its master names it, and the
// Client deletes the key's copies before it drops the key from L1: its
// reload then finds no copy, reads the record, and writes the copy back
// (as any missing copy is repaired). Every instance that holds the key
// deletes the copies, so a write past Hotspot costs R deletions per
// instance; a write through Hotspot is heard this way too. A message that
// follows the instance's own write-back is checked first (tracking.go,
// changed), so that a write-back does not delete the copies it wrote.
//
// A tracking connection that fails is given up once its address is no
// longer a master (a failover, a node removed), and every hot value is
// then marked stale: their reloads ask the current masters to track them.
// A record whose slot moved (MOVED) is read untracked until the Client's
// slot table follows.

// clusterTracking is the state of client tracking on a Redis Cluster.
type clusterTracking struct {
	cc    *redis.ClusterClient
	mu    sync.Mutex           // guards nodes
	nodes map[string]*tracking // by master address; nil after close
}

func newClusterTracking(cc *redis.ClusterClient) *clusterTracking {
	return &clusterTracking{cc: cc, nodes: make(map[string]*tracking)}
}

// node returns the tracking state of the master that node reaches, making
// it and starting its subscriber on first use; nil after close.
func (ct *clusterTracking) node(c *Client, node *redis.Client) *tracking {
	opt := node.Options()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.nodes == nil {
		return nil
	}
	if t := ct.nodes[opt.Addr]; t != nil {
		return t
	}
	t := newServerTracking(opt, c.trackingRefused)
	ct.nodes[opt.Addr] = t
	ctx, cancel := context.WithCancel(c.bg)
	t.stop = cancel
	c.spawn(func() {
		defer cancel()
		c.trackWrites(ctx, t, func() { ct.check(c, opt.Addr, t) })
	})
	return t
}

// check gives up t, the tracking connection to addr, once addr is no
// longer a master of the cluster, and marks every hot value stale so that
// their reloads are tracked by the current masters.
func (ct *clusterTracking) check(c *Client, addr string, t *tracking) {
	ctx, cancel := context.WithTimeout(c.bg, c.o.opTimeout)
	defer cancel()
	ct.cc.ReloadState(ctx)
	var master atomic.Bool // ForEachMaster calls fn for every master at once
	err := ct.cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		if m.Options().Addr == addr {
			master.Store(true)
		}
		return nil
	})
	if err != nil || master.Load() {
		return // the node may come back; its resubscription marks them stale
	}
	ct.mu.Lock()
	if ct.nodes[addr] == t {
		delete(ct.nodes, addr)
	}
	ct.mu.Unlock()
	t.stop()
	_ = t.sub.Close()
	c.markAllStale()
}

// track asks the master of record (the Redis key) to track it for this
// Client.
func (ct *clusterTracking) track(ctx context.Context, c *Client, record string) {
	c.trackedRead(ctx, record, func(p redis.Pipeliner) redis.Cmder { return p.Exists(ctx, record) })
}

// dropCopies deletes the copies of hot key key, whose record changed.
func (ct *clusterTracking) dropCopies(c *Client, key string) {
	ctx, cancel := context.WithTimeout(c.bg, c.o.opTimeout)
	defer cancel()
	if err := c.rep.delCopies(ctx, key); err != nil {
		c.log.Debug("hotcache: deleting the copies of a key written past Hotspot", "key", key, "err", err)
	}
}

// close closes every tracking connection.
func (ct *clusterTracking) close() {
	ct.mu.Lock()
	nodes := ct.nodes
	ct.nodes = nil
	ct.mu.Unlock()
	for _, t := range nodes {
		_ = t.sub.Close()
	}
}
