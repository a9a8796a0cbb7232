package proxy

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// Cluster mode against the local stack's Redis Cluster
// (`deployments/local/stack.sh up --redis-cluster`). Keys of these tests
// start with "rcp:" and the test's name; nothing here kills or reshards a
// node. Each test runs in both upstream modes (bothUpstreams): connections
// of the client's own, and shared ones.

// startClusterProxy runs a proxy in cluster mode in front of addrs.
func startClusterProxy(t *testing.T, addrs []string, mod func(*Config)) *testProxy {
	t.Helper()
	return startProxy(t, addrs[0], func(c *Config) {
		c.RedisCluster = addrs
		if mod != nil {
			mod(c)
		}
	})
}

// clusterFixture is the cluster, a ClusterClient on it, and the test's key
// prefix (deleted on every master at the end).
type clusterFixture struct {
	t      *testing.T
	addrs  []string
	cc     *redis.ClusterClient
	prefix string
}

func newClusterFixture(t *testing.T) *clusterFixture {
	addrs := stacktest.RedisCluster(t)
	f := &clusterFixture{t: t, addrs: addrs, cc: redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}),
		prefix: "rcp:" + stacktest.Name(t) + ":"}
	ctx := context.Background()
	waitUntil(t, 30*time.Second, "the Redis Cluster whole (cluster_state:ok, 3 masters)", func() bool {
		f.cc.ReloadState(ctx)
		info, err := f.cc.ClusterInfo(ctx).Result()
		var n atomic.Int32 // ForEachMaster calls in parallel
		_ = f.cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { n.Add(1); return nil })
		return err == nil && strings.Contains(info, "cluster_state:ok") && n.Load() == 3
	})
	t.Cleanup(func() {
		f.deletePrefix(f.prefix)
		f.cc.Close()
	})
	return f
}

func (f *clusterFixture) deletePrefix(prefix string) {
	ctx := context.Background()
	_ = f.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return nil
	})
}

// master returns the address of the master that owns key's slot.
func (f *clusterFixture) master(key string) string {
	f.t.Helper()
	c, err := f.cc.MasterForKey(context.Background(), key)
	if err != nil {
		f.t.Fatal(err)
	}
	return c.Options().Addr
}

// TestRedisClusterProxyRedisCLI: redis-cli -c through the proxy prints what
// it prints against a node, for keys on every master, and never follows a
// redirection (the proxy shows one address).
func TestRedisClusterProxyRedisCLI(t *testing.T) { bothUpstreams(t, testRedisClusterProxyRedisCLI) }

func testRedisClusterProxyRedisCLI(t *testing.T, upstream string) {
	cli := need(t, "redis-cli")
	f := newClusterFixture(t)
	tp := startClusterProxy(t, f.addrs, func(c *Config) { c.Upstream = upstream })
	host, port := hostPort(tp.addr)
	nhost, nport := hostPort(f.addrs[0])
	run := func(h, p string, args ...string) string {
		out, err := exec.Command(cli, append([]string{"-c", "-h", h, "-p", p}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	var set, get strings.Builder
	masters := map[string]int{}
	for i := range 100 {
		k := fmt.Sprintf("%s%d", f.prefix, i)
		masters[f.master(k)]++
		fmt.Fprintf(&set, "SET %s v%d\n", k, i)
		fmt.Fprintf(&get, "GET %s\n", k)
	}
	if len(masters) != 3 {
		t.Fatalf("the 100 keys are on %d masters, want 3: %v", len(masters), masters)
	}
	// Through the proxy, then directly (redis-cli -c follows MOVED there).
	runIn := func(h, p, in string) string {
		cmd := exec.Command(cli, "-c", "-h", h, "-p", p)
		cmd.Stdin = strings.NewReader(in)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli: %v\n%s", err, out)
		}
		return string(out)
	}
	viaProxySet, viaProxyGet := runIn(host, port, set.String()), runIn(host, port, get.String())
	f.deletePrefix(f.prefix)
	directSet, directGet := runIn(nhost, nport, set.String()), runIn(nhost, nport, get.String())
	// Directly, redis-cli says where it was redirected; through the proxy it
	// never is. Otherwise the same lines.
	if strings.Contains(viaProxySet+viaProxyGet, "Redirected") {
		t.Errorf("redis-cli -c was redirected through the proxy:\n%s%s", viaProxySet, viaProxyGet)
	}
	if !strings.Contains(directGet, "Redirected") {
		t.Errorf("redis-cli -c directly was never redirected (keys on one node?):\n%s", directGet)
	}
	unredirected := func(s string) string {
		return strings.Join(slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool {
			return strings.Contains(l, "-> Redirected to slot")
		}), "\n")
	}
	if viaProxySet != unredirected(directSet) || viaProxyGet != unredirected(directGet) {
		t.Errorf("redis-cli -c through the proxy:\n%s%s\ndirect:\n%s%s", viaProxySet, viaProxyGet, directSet, directGet)
	}
	if strings.Count(viaProxyGet, "\n") != 100 || !strings.Contains(viaProxyGet, "v99") {
		t.Errorf("GETs through the proxy: %q", viaProxyGet)
	}
	// The cluster the proxy shows: itself.
	if out := run(host, port, "CLUSTER", "NODES"); strings.Count(out, " "+tp.addr+"@") != 2 || strings.Contains(out, nhost+":"+nport) {
		t.Errorf("CLUSTER NODES through the proxy:\n%s", out)
	}
	if out := run(host, port, "CLUSTER", "INFO"); !strings.Contains(out, "cluster_state:ok") {
		t.Errorf("CLUSTER INFO through the proxy:\n%s", out)
	}
	for _, k := range []string{"a", "b", "{x}y"} {
		if a, b := run(host, port, "CLUSTER", "KEYSLOT", k), run(nhost, nport, "CLUSTER", "KEYSLOT", k); a != b {
			t.Errorf("CLUSTER KEYSLOT %s: %q through the proxy, %q direct", k, a, b)
		}
	}
}

// TestRedisClusterProxyRedisBenchmark: redis-benchmark, cluster-aware and
// not, through the proxy, without an error.
func TestRedisClusterProxyRedisBenchmark(t *testing.T) {
	bothUpstreams(t, testRedisClusterProxyRedisBenchmark)
}

func testRedisClusterProxyRedisBenchmark(t *testing.T, upstream string) {
	bench := need(t, "redis-benchmark")
	f := newClusterFixture(t)
	tp := startClusterProxy(t, f.addrs, func(c *Config) { c.Upstream = upstream })
	host, port := hostPort(tp.addr)
	t.Cleanup(func() { f.deletePrefix("key:") }) // redis-benchmark's keys
	for _, mode := range [][]string{{"--cluster"}, nil} {
		args := append([]string{"-h", host, "-p", port, "-t", "get,set", "-n", "20000", "-r", "10000", "-q"}, mode...)
		start := time.Now()
		out, err := exec.Command(bench, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark %v: %v\n%s", mode, err, out)
		}
		if strings.Contains(strings.ToLower(string(out)), "error") || !strings.Contains(string(out), "GET: ") {
			t.Fatalf("redis-benchmark %v:\n%s", mode, out)
		}
		var lines []string
		for l := range strings.SplitSeq(strings.ReplaceAll(string(out), "\r", "\n"), "\n") {
			if strings.Contains(l, "requests per second") {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
		t.Logf("redis-benchmark %v (%v): %s", mode, time.Since(start).Round(time.Millisecond), strings.Join(lines, "; "))
	}
}

// TestRedisClusterProxyGoRedis: go-redis's ClusterClient and plain Client
// through the proxy.
func TestRedisClusterProxyGoRedis(t *testing.T) { bothUpstreams(t, testRedisClusterProxyGoRedis) }

func testRedisClusterProxyGoRedis(t *testing.T, upstream string) {
	f := newClusterFixture(t)
	tp := startClusterProxy(t, f.addrs, func(c *Config) { c.Upstream = upstream })
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    redis.UniversalClient
	}{
		{"ClusterClient", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tp.addr}, MaxRedirects: -1})},
		{"ClusterClientRESP2", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tp.addr}, Protocol: 2})},
		{"Client", redis.NewClient(&redis.Options{Addr: tp.addr})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			defer c.Close()
			p := f.prefix + tc.name + ":"
			// Strings, hashes, lists.
			for i := range 30 {
				k := fmt.Sprintf("%ss%d", p, i)
				if err := c.Set(ctx, k, i, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if v, err := c.Get(ctx, k).Int(); err != nil || v != i {
					t.Fatalf("GET %s: %v %v", k, v, err)
				}
			}
			c.HSet(ctx, p+"h", "a", "1", "b", "2")
			if m, err := c.HGetAll(ctx, p+"h").Result(); err != nil || len(m) != 2 || m["b"] != "2" {
				t.Fatalf("HGETALL: %v %v", m, err)
			}
			c.RPush(ctx, p+"l", "x", "y", "z")
			if l, err := c.LRange(ctx, p+"l", 0, -1).Result(); err != nil || strings.Join(l, "") != "xyz" {
				t.Fatalf("LRANGE: %v %v", l, err)
			}
			// A pipeline of 100 over every slot range.
			pipe := c.Pipeline()
			var cmds []*redis.StringCmd
			for i := range 100 {
				k := fmt.Sprintf("%sp%d", p, i)
				pipe.Set(ctx, k, fmt.Sprint("v", i), 0)
				cmds = append(cmds, pipe.Get(ctx, k))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for i, cmd := range cmds {
				if cmd.Val() != fmt.Sprint("v", i) {
					t.Fatalf("pipelined GET %d: %q %v", i, cmd.Val(), cmd.Err())
				}
			}
			clusterGoRedisTx(t, f, c, p)
			// BLPOP served by a push.
			done := make(chan []string, 1)
			go func() {
				v, _ := c.BLPop(ctx, 5*time.Second, p+"q").Result()
				done <- v
			}()
			time.Sleep(200 * time.Millisecond)
			f.cc.RPush(ctx, p+"q", "pushed")
			select {
			case v := <-done:
				if len(v) != 2 || v[1] != "pushed" {
					t.Fatalf("BLPOP: %v", v)
				}
			case <-time.After(6 * time.Second):
				t.Fatal("BLPOP not served")
			}
		})
	}
}

// clusterGoRedisTx runs transactions through the cluster-mode proxy with
// go-redis's c: MULTI/EXEC on one slot with a WATCH conflict and without,
// and CROSSSLOT for MSET over slots.
func clusterGoRedisTx(t *testing.T, f *clusterFixture, c redis.UniversalClient, p string) {
	t.Helper()
	ctx := context.Background()
	// MULTI/EXEC on one slot, with a WATCH conflict.
	k1, k2 := "{"+p+"tx}a", "{"+p+"tx}b"
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		if err := f.cc.Set(ctx, k1, "changed", 0).Err(); err != nil { // behind its back
			return err
		}
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, k1, "tx", 0)
			pipe.Set(ctx, k2, "tx", 0)
			return nil
		})
		return err
	}, k1)
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("a transaction whose WATCHed key changed: %v, want %v", err, redis.TxFailedErr)
	}
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, k1, "tx", 0)
			pipe.Incr(ctx, k2+"n")
			return nil
		})
		return err
	}, k1)
	if err != nil {
		t.Fatalf("a transaction: %v", err)
	}
	if v, _ := f.cc.Get(ctx, k1).Result(); v != "tx" {
		t.Fatalf("after EXEC: %q", v)
	}
	// CROSSSLOT.
	err = c.MSet(ctx, p+"m1", "1", p+"m2", "2", p+"m3", "3").Err()
	if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
		t.Fatalf("MSET over slots: %v", err)
	}
}

// TestRedisClusterProxyCompat: replies through the proxy are the owning
// master's bytes (raw RESP2 and RESP3 connections).
func TestRedisClusterProxyCompat(t *testing.T) { bothUpstreams(t, testRedisClusterProxyCompat) }

func testRedisClusterProxyCompat(t *testing.T, upstream string) {
	f := newClusterFixture(t)
	tp := startClusterProxy(t, f.addrs, func(c *Config) { c.Upstream = upstream })
	for _, proto := range []string{"2", "3"} {
		viaProxy, direct := map[string]*rawConn{}, map[string]*rawConn{}
		conn := func(m map[string]*rawConn, addr string) *rawConn {
			if c := m[addr]; c != nil {
				return c
			}
			c := dialRaw(t, addr)
			t.Cleanup(c.close)
			c.do("HELLO", proto)
			m[addr] = c
			return c
		}
		px := conn(viaProxy, tp.addr)
		for i := range 6 {
			// The same commands on keys of the same slot: "{tag}p..." through
			// the proxy, "{tag}d..." directly on the slot's master.
			tag := fmt.Sprint("{", f.prefix, proto, ":", i, "}")
			for _, cmd := range [][]string{
				{"SET", "s", "hello"}, {"GET", "s"}, {"APPEND", "s", " world"}, {"STRLEN", "s"}, {"GETRANGE", "s", "0", "4"},
				{"HSET", "h", "a", "1", "b", "2"}, {"HGETALL", "h"}, {"HMGET", "h", "a", "x"},
				{"RPUSH", "l", "x", "y", "z"}, {"LRANGE", "l", "0", "-1"}, {"LPOP", "l"},
				{"ZADD", "z", "1.5", "m", "2", "n"}, {"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZSCORE", "z", "m"},
				{"INCR", "n"}, {"INCRBYFLOAT", "n", "0.5"}, {"GET", "missing"}, {"LPUSH", "s", "x"}, {"HGET", "s", "a"},
				{"SET", "s"}, {"MGET", "s", "n"}, {"EXISTS", "s", "h", "z"}, {"DEL", "s", "h", "l", "z", "n"},
			} {
				keyed := func(side string) []string {
					args := slices.Clone(cmd)
					for j := 1; j < len(args); j++ {
						if j == 1 || args[0] == "MGET" || args[0] == "EXISTS" || args[0] == "DEL" {
							args[j] = tag + side + args[j]
						}
					}
					return args
				}
				want := string(conn(direct, f.master(tag)).do(keyed("d")...))
				if got := string(px.do(keyed("p")...)); got != want {
					t.Errorf("RESP%s %v: %q through the proxy, %q from the master", proto, cmd, got, want)
				}
			}
			// Keys of two slots: the proxy's CROSSSLOT, Redis' words.
			if got := string(px.do("MGET", tag+"a", fmt.Sprint(f.prefix, "other", i))); keySlot([]byte(tag+"a")) != keySlot([]byte(fmt.Sprint(f.prefix, "other", i))) &&
				got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
				t.Errorf("MGET over two slots: %q", got)
			}
		}
		// Keyless and unknown commands: the same as on a master.
		d := conn(direct, f.addrs[0])
		for _, args := range [][]string{{"PING"}, {"ECHO", "x"}, {"NOSUCHCOMMAND", "a"}, {"SELECT", "1"}, {"SELECT", "0"}} {
			if got, want := string(px.do(args...)), string(d.do(args...)); got != want {
				t.Errorf("RESP%s %v: %q through the proxy, %q direct", proto, args, got, want)
			}
		}
	}
}

// TestRedisClusterProxyHotKey: a hot key read 20,000 times through the
// proxy costs its master next to nothing.
func TestRedisClusterProxyHotKey(t *testing.T) { bothUpstreams(t, testRedisClusterProxyHotKey) }

func testRedisClusterProxyHotKey(t *testing.T, upstream string) {
	f := newClusterFixture(t)
	zkAddr := stacktest.ZK(t)
	h := stacktest.NewHotSet(t, zkAddr)
	tp := startClusterProxy(t, f.addrs, func(c *Config) {
		c.ZooKeeper, c.ZooKeeperRoot, c.App, c.L1TTL = []string{zkAddr}, h.Root, h.App, time.Minute
		c.Upstream = upstream
	})
	ctx := context.Background()
	hot := f.prefix + "hot"
	f.cc.Set(ctx, hot, "v1", 0)
	h.Set(hot)
	waitUntil(t, 10*time.Second, "the key hot in the proxy", func() bool {
		c := dialRaw(t, tp.addr)
		defer c.close()
		return string(c.do("HOTSPOT", "KEYS")) != "*0\r\n"
	})
	c := dialRaw(t, tp.addr)
	defer c.close()
	if got := string(c.do("GET", hot)); got != "$2\r\nv1\r\n" {
		t.Fatalf("GET: %q", got)
	}
	master := f.master(hot)
	before := commandCalls(t, master, "get")
	const n = 20_000
	hammer(t, tp.addr, n, [][]string{{"GET", hot}}, []string{"$2\r\nv1\r\n"})
	got := commandCalls(t, master, "get") - before
	t.Logf("%d GETs of a hot key through the proxy: its master %s ran %d GETs", n, master, got)
	if got > n/20 {
		t.Errorf("the master ran %d GETs for %d reads of a hot key, want at most %d", got, n, n/20)
	}
	// A write through the proxy is seen at once; MULTI is never from L1.
	c.do("SET", hot, "v2")
	if got := string(c.do("GET", hot)); got != "$2\r\nv2\r\n" {
		t.Errorf("GET after SET: %q", got)
	}
	// Client tracking: once v2 is answered from L1 (after the SET's own
	// broadcast came back over the cluster bus, which drops it once more),
	// a write past the proxy reaches it there too.
	time.Sleep(200 * time.Millisecond)
	waitUntil(t, 5*time.Second, "v2 answered from L1", func() bool {
		hits := infoField(t, tp.addr, "hits")
		return string(c.do("GET", hot)) == "$2\r\nv2\r\n" && infoField(t, tp.addr, "hits") > hits
	})
	start := time.Now()
	f.cc.Set(ctx, hot, "v3", 0) // behind the proxy's back
	c.do("MULTI")
	c.do("GET", hot)
	if got := string(c.do("EXEC")); got != "*1\r\n$2\r\nv3\r\n" {
		t.Errorf("GET in MULTI: %q, want Redis' value", got)
	}
	// Client tracking: the write past the proxy reaches its L1 too.
	waitUntil(t, 2*time.Second, "the value written past the proxy", func() bool { return string(c.do("GET", hot)) == "$2\r\nv3\r\n" })
	t.Logf("a write past the proxy served %v later", time.Since(start).Round(100*time.Microsecond))
	// Read your writes, pipelined: the GET, which L1 could answer, waits
	// for the SET sent before it in the same batch.
	waitUntil(t, 5*time.Second, "v3 answered from L1", func() bool {
		hits := infoField(t, tp.addr, "hits")
		return string(c.do("GET", hot)) == "$2\r\nv3\r\n" && infoField(t, tp.addr, "hits") > hits
	})
	if _, err := c.c.Write(append(encode("SET", hot, "v4"), encode("GET", hot)...)); err != nil {
		t.Fatal(err)
	}
	if c.read(); string(c.read()) != "$2\r\nv4\r\n" {
		t.Error("a GET pipelined after a SET on the same connection did not see it")
	}
}

// TestRedisClusterProxySharedConnections: with shared upstream connections,
// 20 clients reading keys of every master through the proxy reach each
// master over its 2 shared connections (with connections of their own, 20
// each), and every client reads its own values.
func TestRedisClusterProxySharedConnections(t *testing.T) {
	f := newClusterFixture(t)
	tp := startClusterProxy(t, f.addrs, func(c *Config) { c.Upstream = UpstreamShared })
	ctx := context.Background()
	for i := range 30 {
		f.cc.Set(ctx, fmt.Sprint(f.prefix, i), fmt.Sprint("v", i), 0)
	}
	var clients []*rawConn
	for range 20 {
		c := dialRaw(t, tp.addr)
		defer c.close()
		clients = append(clients, c)
	}
	for round := range 3 {
		for ci, c := range clients {
			var req []byte
			for i := range 30 {
				req = append(req, encode("GET", fmt.Sprint(f.prefix, i))...)
			}
			if _, err := c.c.Write(req); err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				if got, want := string(c.read()), fmt.Sprintf("$%d\r\nv%d\r\n", len(fmt.Sprint("v", i)), i); got != want {
					t.Fatalf("round %d, client %d, key %d: %q, want %q", round, ci, i, got, want)
				}
			}
		}
	}
	var mu sync.Mutex
	var masters []string
	_ = f.cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c.Options().Addr)
		return nil
	})
	if len(masters) != 3 {
		t.Fatalf("masters %v, want 3", masters)
	}
	for _, m := range masters {
		mc := redis.NewClient(&redis.Options{Addr: m})
		list, err := mc.ClientList(ctx).Result()
		mc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(list, "cmd=get "); n == 0 || n > 2 {
			t.Errorf("master %s has %d connections whose last command was GET, want the proxy's 2 shared ones:\n%s", m, n, list)
		}
	}
}
