//lint:file-ignore SA1019 CLUSTER SLOTS, as the code under test reads it (it works before Redis 7, unlike CLUSTER SHARDS)

package hotcache

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// These tests run against the Redis Cluster (3 masters, 3 replicas) and the
// Sentinel setup (a primary, a replica, 3 sentinels) of the local stack,
// when HOTSPOT_REDIS_CLUSTER and HOTSPOT_REDIS_SENTINEL name them
// (`stack.sh env --redis-cluster`, `--redis-sentinel`; `make test-redis`).
// ZooKeeper is the plain stack's. The fault tests kill a member through
// stack.sh and start it again: the setups stay whole, though which node is
// a master may change, so the tests find masters by asking the cluster.

// stackMember runs `stack.sh VERB MEMBER FLAG`, to kill or start one member.
func stackMember(t *testing.T, verb, member, flag string) {
	t.Helper()
	out, err := exec.Command("../deployments/local/stack.sh", verb, member, flag).CombinedOutput()
	if err != nil {
		t.Fatalf("stack.sh %s %s %s: %v\n%s", verb, member, flag, err, out)
	}
}

// clusterAdmin is the test's own client of the cluster, once the cluster
// is whole: every slot served, every master with a replica in sync (a
// member killed by an earlier test has rejoined).
func clusterAdmin(t *testing.T, addrs []string) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cc.Close() })
	waitUntil(t, 30*time.Second, "the cluster whole", func() bool {
		slots, err := cc.ClusterSlots(t.Context()).Result()
		if err != nil {
			return false
		}
		n := 0
		for _, r := range slots {
			if len(r.Nodes) < 2 {
				return false
			}
			n += r.End - r.Start + 1
		}
		info, err := cc.ClusterInfo(t.Context()).Result()
		return err == nil && n == 16384 && strings.Contains(info, "cluster_state:ok")
	})
	return cc
}

// sentinelAdmin is the test's own client of the sentinels, once the setup
// is whole: the sentinels agree on a primary, and its replica's link is up.
func sentinelAdmin(t *testing.T, master string, sentinels []string) *redis.SentinelClient {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	t.Cleanup(func() { sc.Close() })
	waitUntil(t, 30*time.Second, "the Sentinel setup whole", func() bool {
		reps, err := sc.Replicas(t.Context(), master).Result()
		if err != nil || len(reps) != 1 {
			return false
		}
		r := reps[0]
		return r["flags"] == "slave" && r["master-link-status"] == "ok"
	})
	return sc
}

// waitUntil is waitFor with a bound of its own.
func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterOf returns the address of the master that owns key's slot now, as
// the cluster says (the client's own table may lag).
func masterOf(t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	slot, err := cc.ClusterKeySlot(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return slotMaster(t, cc, int(slot))
}

// slotMaster returns the address of the master that owns slot now.
func slotMaster(t *testing.T, cc *redis.ClusterClient, slot int) string {
	t.Helper()
	m := slotOwner(t, cc, slot)
	if m == "" {
		t.Fatalf("no node says which master owns slot %d", slot)
	}
	return m
}

// clusterMember names the stack member at addr: the i-th seed address is
// redisI.
func clusterMember(t *testing.T, addrs []string, addr string) string {
	i := slices.Index(addrs, addr)
	if i < 0 {
		t.Fatalf("%s is not one of the cluster's addresses %v", addr, addrs)
	}
	return fmt.Sprint("redis", i+1)
}

// awaitHot waits until every instance serves keys from L1.
func awaitHot(t *testing.T, cs []*Client, keys ...string) {
	t.Helper()
	for _, c := range cs {
		waitFor(t, "promotion", func() bool {
			n := 0
			for _, h := range c.Hot() {
				if h.Loaded && slices.Contains(keys, h.Key) {
					n++
				}
			}
			return n == len(keys)
		})
	}
}

// TestRedisClusterHotKey: 4 instances on the cluster. Before promotion a
// key's reads reach its master; once promoted, at least 95 % of them no
// longer do, and its L2 copies sit on distinct masters.
func TestRedisClusterHotKey(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("k", "v1")
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedisCluster(addrs...), WithRedisKeyPrefix(hs.App+":"), WithLoader(src))
	key := hs.App + ":k"
	master := masterOf(t, cc, key)

	read := func(n int) (reads int64, masterGets int64) {
		before := getCalls(t, master)
		for i := range n {
			if got := get(t, cs[i%len(cs)], "k"); got != "v1" {
				t.Fatalf("Get(k) = %q, want v1", got)
			}
		}
		return int64(n), getCalls(t, master) - before
	}
	reads, gets := read(2000)
	t.Logf("cold: %d reads, %d GETs on its master %s", reads, gets, master)
	if gets < reads/2 { // fewer than all: local protection keeps a busy cold key a moment
		t.Fatalf("cold: %d GETs on the key's master for %d reads: the reads did not reach it", gets, reads)
	}

	hs.Set("k")
	awaitHot(t, cs, "k")
	reads, gets = read(20000)
	spared := 1 - float64(gets)/float64(reads)
	t.Logf("hot: %d reads, %d GETs on its master %s: %.2f %% spared", reads, gets, master, 100*spared)
	if spared < 0.95 {
		t.Errorf("hot: %.2f %% of the reads spared on the key's master, want >= 95 %%", 100*spared)
	}

	// The hot key's L2 copies: written on a load, one per replica tag, each
	// tag on a master of its own.
	rep := cs[0].rep
	if rep == nil || rep.n != 3 {
		t.Fatalf("replicas: %+v, want 3 over the cluster's masters", rep)
	}
	if err := cs[0].Invalidate(t.Context(), "k"); err != nil { // the next load writes the copies
		t.Fatal(err)
	}
	awaitHot(t, cs, "k")
	masters := map[string]string{}
	for _, nd := range rep.list {
		m := masterOf(t, cc, nd.tag)
		if other, dup := masters[m]; dup {
			t.Errorf("tags %s and %s are both on master %s", other, nd.tag, m)
		}
		masters[m] = nd.tag
		waitFor(t, "the copy under "+nd.tag, func() bool {
			v, err := cc.Get(t.Context(), nd.tag+key).Result()
			return err == nil && v == "v1"
		})
	}
}

// TestRedisClusterWrites: a Set on one instance reaches every instance
// within the broadcast bound whichever master holds the key; Warm and
// InvalidatePrefix cover every master.
func TestRedisClusterWrites(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource()
	var keys []string
	for i := range 300 {
		k := fmt.Sprint("w", i)
		keys = append(keys, k)
		src.data[k] = []byte("v1")
	}
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedisCluster(addrs...), WithRedisKeyPrefix(hs.App+":"), WithLoader(src))

	// Warm: every key lands, on every master.
	st, err := cs[0].Warm(t.Context(), keys)
	if err != nil || st.Loaded != len(keys) {
		t.Fatalf("Warm: %+v, %v; want %d loaded", st, err, len(keys))
	}
	perMaster := map[string]int{}
	for _, k := range keys {
		if n, err := cc.Exists(t.Context(), hs.App+":"+k).Result(); err != nil || n != 1 {
			t.Fatalf("after Warm, %s: exists %d, %v", k, n, err)
		}
		perMaster[masterOf(t, cc, hs.App+":"+k)]++
	}
	if len(perMaster) != 3 {
		t.Fatalf("warmed keys on masters %v, want 3", perMaster)
	}

	// A hot key per master; a Set of each from instance 0.
	var hot []string
	for _, k := range keys {
		if !slices.ContainsFunc(hot, func(h string) bool {
			return masterOf(t, cc, hs.App+":"+h) == masterOf(t, cc, hs.App+":"+k)
		}) {
			hot = append(hot, k)
		}
	}
	hs.Set(hot...)
	awaitHot(t, cs, hot...)
	for _, k := range hot {
		start := time.Now()
		if err := cs[0].Set(t.Context(), k, []byte("v2")); err != nil {
			t.Fatal(err)
		}
		var worst time.Duration
		for i, c := range cs {
			waitFor(t, "the new value of "+k, func() bool {
				v, err := c.Get(t.Context(), k)
				return err == nil && string(v) == "v2"
			})
			t.Logf("%s: instance %d after %v", k, i, time.Since(start))
			worst = max(worst, time.Since(start))
		}
		t.Logf("%s (master %s): every instance serves the new value after %v", k, masterOf(t, cc, hs.App+":"+k), worst)
		if worst > 100*time.Millisecond {
			t.Errorf("%s: slowest instance served the new value after %v, want <= 100ms", k, worst)
		}
	}

	// InvalidatePrefix: the untagged keys and the hot keys' tagged copies,
	// on every master.
	n, err := cs[1].InvalidatePrefix(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if n < len(keys) {
		t.Errorf("InvalidatePrefix deleted %d keys, want at least the %d warmed", n, len(keys))
	}
	var left []string
	var mu sync.Mutex // ForEachMaster runs fn on every master at once
	for _, pattern := range []string{hs.App + ":w*", "{" + replicaTagPrefix + "*}" + hs.App + ":w*"} {
		err := cc.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
			ks, err := m.Keys(ctx, pattern).Result()
			mu.Lock()
			left = append(left, ks...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A hot key's reload may have written it back since: only those.
	left = slices.DeleteFunc(left, func(k string) bool {
		return slices.ContainsFunc(hot, func(h string) bool { return strings.HasSuffix(k, ":"+h) })
	})
	if len(left) > 0 {
		t.Errorf("after InvalidatePrefix, %d keys are left, e.g. %q", len(left), left[0])
	}
}

// TestRedisClusterTracking: a hot key per master, written past Hotspot (a
// plain SET by another cluster client): every instance serves the new value
// within 100 ms, where its L1 TTL is a minute, and never the old one again
// (its copies on the other masters were deleted, not read back). With
// tracking off the old value is still served 300 ms later.
func TestRedisClusterTracking(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	for _, tracking := range []bool{true, false} {
		hs := stacktest.NewHotSet(t, zkAddr)
		src := newSource()
		var hot []string
		for i := 0; len(hot) < 3; i++ {
			k := fmt.Sprint("t", i)
			if !slices.ContainsFunc(hot, func(h string) bool {
				return masterOf(t, cc, hs.App+":"+h) == masterOf(t, cc, hs.App+":"+k)
			}) {
				hot = append(hot, k)
				src.data[k] = []byte("v1")
			}
		}
		cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root), WithRedisCluster(addrs...),
			WithRedisKeyPrefix(hs.App+":"), WithLoader(src), WithL1(0, time.Minute), WithRedisTracking(tracking))
		hs.Set(hot...)
		awaitHot(t, cs, hot...)
		for _, c := range cs {
			for _, k := range hot {
				if v := get(t, c, k); v != "v1" {
					t.Fatalf("%s before the write: %q", k, v)
				}
			}
		}
		for _, k := range hot {
			start := time.Now()
			if err := cc.Set(t.Context(), hs.App+":"+k, "v2", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if !tracking {
				time.Sleep(300 * time.Millisecond)
				if v := get(t, cs[0], k); v != "v1" {
					t.Errorf("tracking off: %s is %q 300 ms after the write, want the old value: the test proves nothing", k, v)
				}
				continue
			}
			var worst time.Duration
			for _, c := range cs {
				waitFor(t, "the new value of "+k, func() bool { return get(t, c, k) == "v2" })
				worst = max(worst, time.Since(start))
			}
			t.Logf("%s (master %s): every instance serves the value written past Hotspot after %v", k, masterOf(t, cc, hs.App+":"+k), worst)
			if worst > 100*time.Millisecond {
				t.Errorf("%s: the slowest instance served the new value after %v, want <= 100ms", k, worst)
			}
			for until := time.Now().Add(300 * time.Millisecond); time.Now().Before(until); {
				for i, c := range cs {
					if v := get(t, c, k); v != "v2" {
						t.Fatalf("%s: instance %d serves %q again after the new value", k, i, v)
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if tracking {
			n := 0
			for _, c := range cs {
				c.ctrack.mu.Lock()
				n += len(c.ctrack.nodes)
				c.ctrack.mu.Unlock()
			}
			if n != 3*len(cs) {
				t.Errorf("%d tracking connections over %d instances, want one per master each", n, len(cs))
			}
		}
	}
}

// TestRedisClusterBroadcast: a proxy writes a hot key straight into Redis and
// calls Broadcast. Every instance then serves the new value: Broadcast
// deleted the key's tagged copies, which still held the old one, before it
// told them to reload. Tracking is off: it would delete them too.
func TestRedisClusterBroadcast(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("k", "v1")
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedisCluster(addrs...), WithRedisKeyPrefix(hs.App+":"), WithLoader(src), WithRedisTracking(false))
	hs.Set("k")
	awaitHot(t, cs, "k") // loaded from the source: the copies hold v1
	for _, nd := range cs[0].rep.list {
		waitFor(t, "the copy under "+nd.tag, func() bool {
			v, err := cc.Get(t.Context(), nd.tag+hs.App+":k").Result()
			return err == nil && v == "v1"
		})
	}
	if err := cc.Set(t.Context(), hs.App+":k", "v2", time.Minute).Err(); err != nil { // the proxy's write
		t.Fatal(err)
	}
	if err := cs[1].Broadcast(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		waitUntil(t, time.Second, fmt.Sprint("instance ", i, " serving v2"), func() bool {
			v, err := c.Get(t.Context(), "k")
			return err == nil && string(v) == "v2"
		})
	}
}

// reader reads its keys in a loop until stop, checking every value, and
// counts reads and errors.
type reader struct {
	reads, errs, wrong atomic.Int64
	lastErr            atomic.Value
}

func (r *reader) run(c *Client, keys []string, want func(key string) string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		k := keys[i%len(keys)]
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := c.Get(ctx, k)
		cancel()
		switch {
		case err != nil:
			r.errs.Add(1)
			r.lastErr.Store(err.Error())
		case string(v) != want(k):
			r.wrong.Add(1)
		default:
			r.reads.Add(1)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// slotKey returns a key name in slot.
func slotKey(t *testing.T, cc *redis.ClusterClient, slot int) string {
	t.Helper()
	for i := 0; ; i += 1000 {
		pipe := cc.Pipeline()
		cmds := make([]*redis.IntCmd, 1000)
		for j := range cmds {
			cmds[j] = pipe.ClusterKeySlot(t.Context(), fmt.Sprint("m", i+j))
		}
		if _, err := pipe.Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
		for j, c := range cmds {
			if int(c.Val()) == slot {
				return fmt.Sprint("m", i+j)
			}
		}
	}
}

// nodeID returns the cluster node ID of the node at addr.
func nodeID(t *testing.T, addr string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	id, err := c.Do(context.Background(), "cluster", "myid").Text() // also from a cleanup
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// reshard moves count slots, the lowest of from's, to the master to, with
// redis-cli.
func reshard(t *testing.T, seed, from, to string, count int) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := exec.Command("redis-cli", "--cluster", "reshard", seed,
		"--cluster-from", nodeID(t, from), "--cluster-to", nodeID(t, to),
		"--cluster-slots", strconv.Itoa(count), "--cluster-yes", "--cluster-pipeline", "100").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	return time.Since(start)
}

// TestRedisClusterReshard migrates the slot of a hot key (slot 0), with
// 20,000 keys of its own, to another master while 4 instances read it and
// cold keys of the same slot: no read fails or is wrong, and after the move
// a Set is seen by every instance (no stale value). Then it moves the slot
// back: the lowest slot of its new master, so redis-cli picks it.
func TestRedisClusterReshard(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	hs := stacktest.NewHotSet(t, zkAddr)
	const slot = 0
	from := slotMaster(t, cc, slot)
	name := slotKey(t, cc, slot)
	to := slotMaster(t, cc, 16383) // the last master: the first owns slot 0
	if to == from {
		t.Fatalf("slots 0 and 16383 are both on %s", from)
	}
	// The app's keys: a hot one and 100 cold ones in the slot; 20,000 more
	// keys in it make the migration take a while.
	hot := "{" + name + "}hot"
	src := newSource(hot, "v1")
	var cold []string
	for i := range 100 {
		k := fmt.Sprint("{", name, "}cold", i)
		cold = append(cold, k)
		src.data[k] = []byte("c" + k)
	}
	pipe := cc.Pipeline()
	for i := range 20000 {
		pipe.Set(t.Context(), fmt.Sprint("{", name, "}filler", i), "x", 10*time.Minute)
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pipe := cc.Pipeline()
		for i := range 20000 {
			pipe.Del(context.Background(), fmt.Sprint("{", name, "}filler", i))
		}
		_, _ = pipe.Exec(context.Background())
	})
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedisCluster(addrs...), WithRedisKeyPrefix(hs.App+":"), WithLoader(src)) // the tag keeps the slot
	hs.Set(hot)
	awaitHot(t, cs, hot)

	var value atomic.Value
	value.Store("v1")
	want := func(k string) string {
		if k == hot {
			return value.Load().(string)
		}
		return "c" + k
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hr, cr reader
	for _, c := range cs {
		wg.Add(2)
		go hr.run(c, []string{hot}, want, stop, &wg)
		go cr.run(c, cold, want, stop, &wg)
	}
	time.Sleep(500 * time.Millisecond)
	took := reshard(t, addrs[0], from, to, 1)
	t.Cleanup(func() { reshard(t, addrs[0], to, from, 1) }) // after the fillers' deletion: cleanups run last first
	if m := masterOf(t, cc, hot); m != to {
		t.Fatalf("slot %d is on %s after the reshard, want %s", slot, m, to)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("slot %d (20,100 keys) moved from %s to %s in %v; hot reads %d (errors %d, wrong %d), cold reads %d (errors %d, wrong %d)",
		slot, from, to, took, hr.reads.Load(), hr.errs.Load(), hr.wrong.Load(), cr.reads.Load(), cr.errs.Load(), cr.wrong.Load())
	for what, r := range map[string]*reader{"hot": &hr, "cold": &cr} {
		if r.errs.Load() > 0 || r.wrong.Load() > 0 {
			t.Errorf("%s reads during the migration: %d errors (last: %v), %d wrong values", what, r.errs.Load(), r.lastErr.Load(), r.wrong.Load())
		}
	}
	// No stale value after the move.
	value.Store("v2")
	if err := cs[2].Set(t.Context(), hot, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		waitFor(t, "the new value after the move", func() bool {
			v, err := c.Get(t.Context(), hot)
			return err == nil && string(v) == "v2"
		})
	}
}

// failoverApp is 4 instances of an app that reads a hot key, "hot", and 100
// cold keys that Redis holds, for the failover tests.
type failoverApp struct {
	cs    []*Client
	cold  []string
	value atomic.Value // the hot key's value, as the source has it
}

func newFailoverApp(t *testing.T, redisOpt Option) *failoverApp {
	t.Helper()
	zkAddr := stacktest.ZK(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("hot", "v1")
	a := &failoverApp{}
	a.value.Store("v1")
	for i := range 100 {
		k := fmt.Sprint("cold", i)
		a.cold = append(a.cold, k)
		src.data[k] = []byte("c" + k)
	}
	a.cs = startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		redisOpt, WithRedisKeyPrefix(hs.App+":"), WithLoader(src))
	for _, k := range a.cold {
		get(t, a.cs[0], k) // into Redis
	}
	hs.Set("hot")
	awaitHot(t, a.cs, "hot")
	return a
}

// want is key's right value.
func (a *failoverApp) want(key string) string {
	if key == "hot" {
		return a.value.Load().(string)
	}
	return "c" + key
}

// setEverywhere changes the hot key through one instance and waits until
// every instance serves the new value.
func (a *failoverApp) setEverywhere(t *testing.T, v string) {
	t.Helper()
	a.value.Store(v)
	if err := a.cs[3].Set(t.Context(), "hot", []byte(v)); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.cs {
		waitFor(t, "the new value after the failover", func() bool {
			got, err := c.Get(t.Context(), "hot")
			return err == nil && string(got) == v
		})
	}
}

// failover runs readers of the hot key and of the cold keys on every
// instance, calls fault, and waits for newMaster to name the master that
// took over (not victim). It checks that hot reads never fail, and that cold
// reads, which fail or get the breaker's fallback meanwhile, reach the new
// master again and then go a whole second without an error or an open
// breaker in any instance. It returns the time from the fault to the new
// master and to the last failed cold read or open breaker.
func (a *failoverApp) failover(t *testing.T, fault func(), victim string, newMaster func() string) (promoted, recovered time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hr, cr reader
	for _, c := range a.cs {
		wg.Add(2)
		go hr.run(c, []string{"hot"}, a.want, stop, &wg)
		go cr.run(c, a.cold, a.want, stop, &wg)
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	fault()
	var m string
	deadline := start.Add(20 * time.Second)
	for m = newMaster(); m == victim || m == ""; m = newMaster() {
		if time.Now().After(deadline) {
			t.Fatalf("no master took over from %s within 20 s", victim)
		}
		time.Sleep(20 * time.Millisecond)
	}
	promoted = time.Since(start)
	gets := getCalls(t, m)
	var lastBad time.Time // the last failed cold read or open breaker seen
	errs := cr.errs.Load()
	for settled := time.Now(); getCalls(t, m) == gets || time.Since(settled) < time.Second; {
		if time.Now().After(deadline) {
			t.Fatalf("cold reads still fail, or do not reach the new master %s, 20 s after the fault", m)
		}
		time.Sleep(20 * time.Millisecond)
		n := cr.errs.Load()
		if n != errs || slices.ContainsFunc(a.cs, func(c *Client) bool { return c.br.state.Load() != stateClosed }) {
			errs, lastBad, settled = n, time.Now(), time.Now()
		}
	}
	if !lastBad.IsZero() {
		recovered = lastBad.Sub(start)
	}
	close(stop)
	wg.Wait()
	t.Logf("hot reads %d (errors %d, wrong %d); cold reads %d (errors %d, last %v, wrong %d); new master %s after %v, last failed cold read or open breaker after %v",
		hr.reads.Load(), hr.errs.Load(), hr.wrong.Load(), cr.reads.Load(), cr.errs.Load(), cr.lastErr.Load(), cr.wrong.Load(),
		m, promoted, recovered)
	if hr.errs.Load() > 0 || hr.wrong.Load() > 0 {
		t.Errorf("hot reads: %d errors (last %v), %d wrong; want none: L1 serves them", hr.errs.Load(), hr.lastErr.Load(), hr.wrong.Load())
	}
	if cr.wrong.Load() > 0 {
		t.Errorf("cold reads: %d wrong values", cr.wrong.Load())
	}
	return promoted, recovered
}

// TestRedisClusterMasterKill kills (SIGKILL) the master whose slot holds
// the invalidation channel, so every subscription is cut: its replica takes
// over, the hot key is served all along, cold keys recover, and a Set after
// the failover reaches every instance.
func TestRedisClusterMasterKill(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	cc := clusterAdmin(t, addrs)
	a := newFailoverApp(t, WithRedisCluster(addrs...))
	channel := a.cs[0].channel
	victim := masterOf(t, cc, channel)
	slot := int(cc.ClusterKeySlot(t.Context(), channel).Val())
	member := clusterMember(t, addrs, victim)
	t.Cleanup(func() { stackMember(t, "start", member, "--redis-cluster") })
	kill := func() { stackMember(t, "kill", member, "--redis-cluster") }
	promoted, recovered := a.failover(t, kill, victim, func() string { return slotOwner(t, cc, slot) })
	t.Logf("master %s (%s) killed: its replica took over after %v, the last cold read failed or breaker was open after %v", victim, member, promoted, recovered)
	a.setEverywhere(t, "v2")
}

// TestRedisClusterTrackingFailover kills (SIGKILL) the master of a hot key's
// record: once its replica took over, a write past Hotspot to the key still
// reaches every instance. Each gave up its tracking connection to the dead
// master and had the key tracked by the new one.
func TestRedisClusterTrackingFailover(t *testing.T) {
	addrs := stacktest.RedisCluster(t)
	zkAddr := stacktest.ZK(t)
	cc := clusterAdmin(t, addrs)
	hs := stacktest.NewHotSet(t, zkAddr)
	cs := startInstances(t, 2, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root), WithRedisCluster(addrs...),
		WithRedisKeyPrefix(hs.App+":"), WithLoader(newSource("hot", "v1")), WithL1(0, time.Minute))
	hs.Set("hot")
	awaitHot(t, cs, "hot")
	record := hs.App + ":hot"
	victim := masterOf(t, cc, record)
	slot := int(cc.ClusterKeySlot(t.Context(), record).Val())
	member := clusterMember(t, addrs, victim)
	t.Cleanup(func() { stackMember(t, "start", member, "--redis-cluster") })
	start := time.Now()
	stackMember(t, "kill", member, "--redis-cluster")
	waitUntil(t, 20*time.Second, "a new master for the hot key", func() bool {
		m := slotOwner(t, cc, slot)
		return m != "" && m != victim
	})
	promoted := time.Since(start)
	// The write, past Hotspot, once the test's own client reaches the new
	// master. Each instance must hear of it from Redis: a reload for
	// another reason would pass without tracking.
	tracked := make([]float64, len(cs))
	for i, c := range cs {
		tracked[i] = testutil.ToFloat64(c.m.invalidations.WithLabelValues("tracked"))
	}
	waitUntil(t, 10*time.Second, "the write on the new master", func() bool {
		cc.ReloadState(t.Context())
		return cc.Set(t.Context(), record, "v2", 0).Err() == nil
	})
	written := time.Now()
	for i, c := range cs {
		waitUntil(t, 5*time.Second, fmt.Sprint("instance ", i, " to serve the value written past Hotspot"), func() bool {
			v, err := c.Get(t.Context(), "hot")
			return err == nil && string(v) == "v2"
		})
		if testutil.ToFloat64(c.m.invalidations.WithLabelValues("tracked")) == tracked[i] {
			t.Errorf("instance %d serves the new value, but Redis did not tell it of the write", i)
		}
	}
	t.Logf("master %s (%s) killed: a new one after %v; a write past Hotspot then served everywhere after %v",
		victim, member, promoted, time.Since(written))
	for _, c := range cs {
		c.ctrack.mu.Lock()
		_, old := c.ctrack.nodes[victim]
		c.ctrack.mu.Unlock()
		if old {
			t.Errorf("an instance still keeps its tracking connection to the dead master %s", victim)
		}
	}
}

// slotOwner is the address of the master that owns slot now, or "" when no
// node answers (a cluster failing over) or none owns it.
func slotOwner(t *testing.T, cc *redis.ClusterClient, slot int) string {
	slots, err := cc.ClusterSlots(t.Context()).Result() // from a live node
	if err != nil {
		return ""
	}
	for _, r := range slots {
		if r.Start <= slot && slot <= r.End {
			return r.Nodes[0].Addr
		}
	}
	return ""
}

// TestRedisSentinelFailover kills the primary behind Sentinel: the replica
// is promoted, the hot key is served all along, cold keys recover, and a
// Set after the failover reaches every instance.
func TestRedisSentinelFailover(t *testing.T) {
	master, sentinels := stacktest.RedisSentinel(t)
	sc := sentinelAdmin(t, master, sentinels)
	a := newFailoverApp(t, WithRedisSentinel(master, sentinels...))
	primary := func() string {
		addr, err := sc.GetMasterAddrByName(t.Context(), master).Result()
		if err != nil {
			t.Fatal(err)
		}
		return addr[0] + ":" + addr[1]
	}
	victim := primary()
	member := "primary"
	if !strings.HasSuffix(victim, ":17101") {
		member = "replica"
	}
	t.Cleanup(func() { stackMember(t, "start", member, "--redis-sentinel") })
	kill := func() { stackMember(t, "kill", member, "--redis-sentinel") }
	promoted, recovered := a.failover(t, kill, victim, primary)
	t.Logf("primary %s (%s) killed: the sentinels promoted its replica after %v, the last cold read failed or breaker was open after %v", victim, member, promoted, recovered)
	a.setEverywhere(t, "v2")
}

// BenchmarkColdGet is a Get of a cold key that Redis holds (one GET), on the
// single server of the local stack and on its Redis Cluster, one call at a
// time; it reports the p50 and p99 of the calls. 10,000 keys in turn, so no
// key is read often enough to be kept locally.
func BenchmarkColdGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  func(b *testing.B) Option
	}{
		{"single", func(b *testing.B) Option { return WithRedis(stacktest.Redis(b)) }},
		{"cluster", func(b *testing.B) Option {
			v := os.Getenv("HOTSPOT_REDIS_CLUSTER")
			if v == "" {
				b.Skip("needs the Redis Cluster (HOTSPOT_REDIS_CLUSTER)")
			}
			return WithRedisCluster(strings.Split(v, ",")...)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const keys = 10000
			prefix := stacktest.Name(b) + ":"
			c, err := New(context.Background(), WithApp("bench"), bc.opt(b), WithRedisKeyPrefix(prefix), WithLoaderLimit(NoLimit),
				WithLoader(LoaderFunc(func(ctx context.Context, key string) ([]byte, error) { return []byte("v:" + key), nil })))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			for i := range keys { // into Redis
				if _, err := c.Get(ctx, strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if _, err := c.Get(ctx, strconv.Itoa(i%keys)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkRedisClusterWriteToEveryL1 is BenchmarkWriteToEveryL1 on the
// Redis Cluster: per write of a hot key, the time until every one of 4
// instances serves the new value, the key written past Hotspot by a plain
// cluster client (tracking: its master tells each instance, which deletes
// the key's copies and reloads it) or through one of the instances (Set:
// its broadcast). Each instance is polled every 20 µs.
func BenchmarkRedisClusterWriteToEveryL1(b *testing.B) {
	addrs := stacktest.RedisCluster(b)
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer admin.Close()
	ctx := context.Background()
	for _, via := range []string{"tracking", "broadcast"} {
		b.Run(via, func(b *testing.B) {
			prefix := fmt.Sprint("bench-", via, "-", time.Now().UnixNano(), ":")
			src := newSource("k", "v")
			cs := make([]*Client, 4)
			for i := range cs {
				cs[i] = newClient(b, WithRedisCluster(addrs...), WithRedisKeyPrefix(prefix), WithLoader(src),
					WithL1(0, time.Minute), WithHotReadLimit(NoLimit))
				promote(b, cs[i], "k")
			}
			writeToEveryL1(b, cs, func(v string) error {
				if via == "tracking" {
					return admin.Set(ctx, prefix+"k", v, 0).Err()
				}
				return cs[0].Set(ctx, "k", []byte(v))
			})
			admin.Del(ctx, prefix+"k") // the copies expire with the Client's Redis TTL
		})
	}
}
