package hotcache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/router"
)

// These tests start their own redis-server processes on free loopback
// ports, with the DEBUG command enabled so that a test can slow one down.

// replicaServer is a private redis-server with a client of the test's own.
type replicaServer struct {
	addr string
	cmd  *exec.Cmd
	rdb  *redis.Client
}

func startReplicaServers(tb testing.TB, n int) []*replicaServer {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		stacktest.Redis(tb) // skip (or fail under CI) the way the shared stack does
		tb.Skip("redis-server not installed")
	}
	out := make([]*replicaServer, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		s := &replicaServer{addr: "127.0.0.1:" + strconv.Itoa(port)}
		s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "no", "--enable-debug-command", "yes")
		if err := s.cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(s.kill)
		s.rdb = redis.NewClient(&redis.Options{Addr: s.addr})
		tb.Cleanup(func() { s.rdb.Close() })
		for j := 0; s.rdb.Ping(context.Background()).Err() != nil; j++ {
			if j > 200 {
				tb.Fatalf("redis-server on %s did not start", s.addr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		out[i] = s
	}
	return out
}

func (s *replicaServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// gets returns how many GETs the server has run (INFO commandstats).
func (s *replicaServer) gets(tb testing.TB) int64 { return getCalls(tb, s.addr) }

func addrsOf(ss []*replicaServer) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.addr
	}
	return out
}

// getsOf returns each server's GET count.
func getsOf(tb testing.TB, ss []*replicaServer) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = s.gets(tb)
	}
	return out
}

// readL2 reads key the way an instance whose L1 is cold does, until stop is
// closed: the hot-key backend read (Redis replicas, then the Loader).
func readL2(tb testing.TB, c *Client, key string, stop <-chan struct{}, reads *atomic.Int64) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, notFound, err := c.fetch(ctx, key, true, nil)
		cancel()
		if err != nil || notFound {
			tb.Errorf("hot read of %q: notFound %v, err %v", key, notFound, err)
			return
		}
		reads.Add(1)
	}
}

// holders returns the servers that hold key, and the value each holds.
func holders(t *testing.T, ss []*replicaServer, key string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range ss {
		if s.cmd == nil {
			continue // killed
		}
		v, err := s.rdb.Get(context.Background(), key).Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			t.Fatal(err)
		default:
			out[s.addr] = v
		}
	}
	return out
}

// TestReplicasHotAndCold checks where values live: a hot key's value on its
// R ring nodes, a cold key's on its owner alone; and that Set and Delete
// remove every copy.
func TestReplicasHotAndCold(t *testing.T) {
	ss := startReplicaServers(t, 4)
	src := newSource("hot", "v1", "cold", "c")
	c := newClient(t, WithRedis(addrsOf(ss)...), WithLoader(src), WithRedisReplicas(3))
	ring, err := router.New([]router.Node{{ID: ss[0].addr}, {ID: ss[1].addr}, {ID: ss[2].addr}, {ID: ss[3].addr}}, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every Redis shard up in the ring", func() bool { return c.rdb.Ping(context.Background()).Err() == nil })

	get(t, c, "cold")
	owner, _ := ring.Lookup("cold")
	if got := holders(t, ss, "cold"); len(got) != 1 || got[owner.ID] != "c" {
		t.Errorf("cold key held by %v, want only its owner %s", got, owner.ID)
	}

	promote(t, c, "hot")
	want := map[string]bool{}
	for _, n := range ring.LookupN("hot", 3, nil) {
		want[n.ID] = true
	}
	got := holders(t, ss, "hot")
	for id := range want {
		if got[id] != "v1" {
			t.Errorf("hot key on %s = %q, want v1 (replicas %v, holders %v)", id, got[id], want, got)
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("hot key on %s, which is not one of its replicas %v", id, want)
		}
	}

	// Set deletes every copy; the hot key's reload then writes the new
	// value back to every replica. No replica may serve v1 again.
	if err := c.Set(context.Background(), "hot", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	for id, v := range holders(t, ss, "hot") {
		if v != "v2" {
			t.Errorf("right after Set, %s holds %q, want v2 or nothing", id, v)
		}
	}
	waitFor(t, "v2 on every replica", func() bool {
		got := holders(t, ss, "hot")
		for id := range want {
			if got[id] != "v2" {
				return false
			}
		}
		return len(got) == len(want)
	})
	if err := c.Delete(context.Background(), "hot"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no copy of a deleted key", func() bool { return len(holders(t, ss, "hot")) == 0 })
	// The key is still hot, so it is reloaded: not found now, and that
	// answer is not written to Redis.
	if _, err := c.Get(context.Background(), "hot"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of the deleted key: %v, want ErrNotFound", err)
	}
}

// TestReplicaRepair: a replica without the value is filled from the owner
// on the first read that picks it.
func TestReplicaRepair(t *testing.T) {
	ss := startReplicaServers(t, 3)
	src := newSource("k", "v")
	c := newClient(t, WithRedis(addrsOf(ss)...), WithLoader(src))
	promote(t, c, "k")
	ring := c.rep.table.Ring()
	nodes := ring.LookupN("k", 3, nil)
	// Drop the copy on the second replica and make it the Picker's choice.
	victim := nodes[1].ID
	if err := c.rep.nodes[victim].rdb.Del(context.Background(), "k").Err(); err != nil {
		t.Fatal(err)
	}
	loads := src.loads.Load()
	// A sampler's PING may mark a node healthy again between the marks and
	// the read: read until the victim has been picked.
	for i := 0; testCounter(t, c.rep.repairs) == 0; i++ {
		if i == 50 {
			t.Fatal("the victim was never picked")
		}
		c.rep.picker.MarkUnhealthy(nodes[0].ID)
		c.rep.picker.MarkUnhealthy(nodes[2].ID)
		if v, notFound, err := c.fetch(context.Background(), "k", true, nil); err != nil || notFound || string(v) != "v" {
			t.Fatalf("read with the victim picked: %q, %v, %v; want v", v, notFound, err)
		}
	}
	if got := src.loads.Load() - loads; got != 0 {
		t.Errorf("source loads = %d, want 0 (the owner had the value)", got)
	}
	if got := holders(t, ss, "k")[victim]; got != "v" {
		t.Errorf("victim %s after the read holds %q, want v (repaired)", victim, got)
	}
	if got := testCounter(t, c.rep.repairs); got != 1 {
		t.Errorf("repairs = %v, want 1", got)
	}
}

// TestReplicaDown: with one replica killed, hot reads go on from the
// others without an error, and Set reports the replica it could not reach.
func TestReplicaDown(t *testing.T) {
	ss := startReplicaServers(t, 3)
	ring, err := router.New([]router.Node{{ID: ss[0].addr}, {ID: ss[1].addr}, {ID: ss[2].addr}}, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A key whose second replica is not the node of the invalidation
	// channel (go-redis's Ring publishes there): Set can then broadcast.
	channelNode, _ := ring.Lookup("hotcache:invalidate:shop")
	key := ""
	var nodes []router.Node
	for i := 0; nodes == nil || nodes[1].ID == channelNode.ID; i++ {
		key = fmt.Sprint("k", i)
		nodes = ring.LookupN(key, 3, nil)
	}
	src := newSource(key, "v")
	c := newClient(t, WithRedis(addrsOf(ss)...), WithLoader(src), WithTimeout(100*time.Millisecond))
	promote(t, c, key)
	kill := func(id string) {
		for _, s := range ss {
			if s.addr == id {
				s.kill()
			}
		}
	}
	read := func(what string) {
		loads := src.loads.Load()
		for i := range 200 {
			if v, notFound, err := c.fetch(context.Background(), key, true, nil); err != nil || notFound || string(v) != "v" {
				t.Fatalf("read %d with %s down: %q, %v, %v; want v", i, what, v, notFound, err)
			}
		}
		if got := src.loads.Load() - loads; got != 0 {
			t.Errorf("source loads with %s down = %d, want 0 (another replica holds the value)", what, got)
		}
	}
	kill(nodes[1].ID)
	read("a replica")
	kill(nodes[0].ID)
	read("the owner and a replica")
	// Neither the owner nor the replica that is down can take the DEL: Set
	// names both, and until the invalidation lands this instance reads the
	// key from its source alone (pending.go), never from the live replica.
	err = c.Set(context.Background(), key, []byte("v2"))
	if !errors.Is(err, ErrNotInvalidated) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), nodes[1].ID) {
		t.Errorf("Set with a replica down: %v, want ErrNotInvalidated, ErrUnavailable, naming %s", err, nodes[1].ID)
	}
	loads := src.loads.Load()
	if v, _, err := c.fetch(context.Background(), key, true, nil); err != nil || string(v) != "v2" || src.loads.Load() == loads {
		t.Errorf("read after Set with the invalidation pending: %q, %v, %d loads; want v2 from the source", v, err, src.loads.Load()-loads)
	}
}

// TestReadsLeaveSlowReplica reads one hot key from 3 instances whose L1 is
// cold, slows one of its 3 replicas down with DEBUG SLEEP, and checks that
// within 1 s the slowed server gets (nearly) no more GETs, from its own
// command counters; then lets it recover and checks it gets reads again.
func TestReadsLeaveSlowReplica(t *testing.T) {
	ss := startReplicaServers(t, 3)
	src := newSource("item:1", "v")
	cs := make([]*Client, 3)
	for i := range cs {
		cs[i] = newClient(t, WithInstanceID(fmt.Sprint("i", i)), WithRedis(addrsOf(ss)...), WithLoader(src))
		promote(t, cs[i], "item:1")
	}
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		for range 3 {
			wg.Go(func() { readL2(t, c, "item:1", stop, &reads) })
		}
	}
	defer func() { close(stop); wg.Wait() }()

	window := func(d time.Duration) []int64 {
		before := getsOf(t, ss)
		time.Sleep(d)
		after := getsOf(t, ss)
		for i := range after {
			after[i] -= before[i]
		}
		return after
	}
	share := func(g []int64, i int) float64 {
		var sum int64
		for _, n := range g {
			sum += n
		}
		return float64(g[i]) / float64(max(sum, 1))
	}

	time.Sleep(500 * time.Millisecond)
	g := window(time.Second)
	t.Logf("GETs per server in 1 s, all fast: %v", g)
	slow := 0
	for i := range g { // slow down the busiest
		if g[i] > g[slow] {
			slow = i
		}
		if share(g, i) < 0.10 {
			t.Errorf("server %d took %.0f%% of the GETs, want >= 10%% (reads spread over the replicas)", i, 100*share(g, i))
		}
	}

	slowing := make(chan struct{})
	slowed := make(chan struct{})
	stopSlowing := sync.OnceFunc(func() { close(slowing); <-slowed })
	defer stopSlowing() // before the servers stop, even if the test fails
	go func() {
		defer close(slowed)
		dbg := redis.NewClient(&redis.Options{Addr: ss[slow].addr})
		defer dbg.Close()
		for {
			select {
			case <-slowing:
				return
			default:
			}
			// The server answers nothing for 100 ms, then whatever queued:
			// its GETs take about 50 ms, a hundred times its peers'.
			if err := dbg.Do(context.Background(), "DEBUG", "SLEEP", "0.1").Err(); err != nil {
				t.Errorf("DEBUG SLEEP: %v", err)
				return
			}
		}
	}()
	start := time.Now()
	first := window(time.Second)
	g = window(time.Second)
	t.Logf("GETs per server, server %d slowed: first second %v, second second %v (after %v)", slow, first, g, time.Since(start))
	// A fair share is a third; a slowed server may still get a few reads
	// (a sample interval of them before the Picker sees its latency, and
	// on a loaded host its peers are slow too at times).
	if s := share(g, slow); s > 0.10 {
		t.Errorf("slowed server took %.1f%% of the GETs in its second second, want <= 10%%", 100*s)
	}
	stopSlowing()

	g = window(2 * time.Second)
	t.Logf("GETs per server in the 2 s after the slowdown ended: %v", g)
	if s := share(g, slow); s < 0.10 {
		t.Errorf("recovered server took %.1f%% of the GETs, want >= 10%% (it wins reads back)", 100*s)
	}
}

// BenchmarkHotKeyL2 reads one hot key the way instances whose L1 is cold (or
// off) do, through the hot-key backend read, from 4 instances over 3 private
// redis-servers, with R = 1 (the owner alone, as before replication) and
// R = 3: flat out, and paced at 5,000 reads/s in all so that the rates
// compare at the same offered load. It reports the servers' GETs per second
// from their own command counters: the busiest server's rate, all servers'
// together, and the busiest one's share.
func BenchmarkHotKeyL2(b *testing.B) {
	for _, mode := range []struct {
		name string
		rate rate.Limit
	}{{"max", rate.Inf}, {"5k-per-s", 5000}} {
		for _, r := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/R=%d", mode.name, r), func(b *testing.B) { benchHotKeyL2(b, r, mode.rate) })
		}
	}
}

func benchHotKeyL2(b *testing.B, r int, perSecond rate.Limit) {
	ss := startReplicaServers(b, 3)
	src := newSource("item:1", "v")
	cs := make([]*Client, 4)
	for i := range cs {
		c, err := New(context.Background(), WithApp("bench"), WithInstanceID(fmt.Sprint("i", i)),
			WithRedis(addrsOf(ss)...), WithLoader(src), WithRedisReplicas(r))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		for j := 0; c.rdb.Ping(context.Background()).Err() != nil; j++ {
			if j > 1000 {
				b.Fatal("Redis ring not up")
			}
			time.Sleep(time.Millisecond)
		}
		promote(b, c, "item:1")
		cs[i] = c
	}
	time.Sleep(200 * time.Millisecond) // a few samples of every replica
	var next atomic.Int64
	lim := rate.NewLimiter(perSecond, 16)
	before := getsOf(b, ss)
	start := time.Now()
	b.SetParallelism(8) // 16 readers on 2 cores, 4 per instance
	b.RunParallel(func(pb *testing.PB) {
		c := cs[next.Add(1)%int64(len(cs))]
		for pb.Next() {
			if err := lim.Wait(context.Background()); err != nil {
				b.Error(err)
				return
			}
			if _, notFound, err := c.fetch(context.Background(), "item:1", true, nil); err != nil || notFound {
				b.Errorf("hot read: notFound %v, err %v", notFound, err)
				return
			}
		}
	})
	elapsed := time.Since(start).Seconds()
	after := getsOf(b, ss)
	var busiest, all int64
	for i := range after {
		d := after[i] - before[i]
		busiest = max(busiest, d)
		all += d
	}
	b.ReportMetric(float64(busiest)/elapsed, "busiest-GETs/s")
	b.ReportMetric(float64(all)/elapsed, "all-GETs/s")
	b.ReportMetric(100*float64(busiest)/float64(max(all, 1)), "busiest-%")
}

func TestWithRedisReplicas(t *testing.T) {
	four := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"}
	tests := []struct {
		name  string
		addrs []string
		opt   Option
		want  int // R; 0: replication off
		err   bool
	}{
		{"default", four, nil, 3, false},
		{"zero keeps the default", four, WithRedisReplicas(0), 3, false},
		{"two", four, WithRedisReplicas(2), 2, false},
		{"more than the nodes", four, WithRedisReplicas(16), 4, false},
		{"one turns it off", four, WithRedisReplicas(1), 0, false},
		{"one address", four[:1], nil, 0, false},
		{"repeated addresses count once", []string{four[0], four[0], four[1]}, nil, 2, false},
		{"negative", four, WithRedisReplicas(-1), 0, true},
		{"above 16", four, WithRedisReplicas(17), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithApp("shop"), WithRedis(tt.addrs...)}
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			c, err := New(context.Background(), opts...)
			if tt.err {
				if err == nil {
					c.Close()
					t.Fatalf("New succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got := 0
			if c.rep != nil {
				got = c.rep.n
			}
			if got != tt.want {
				t.Errorf("R = %d, want %d", got, tt.want)
			}
		})
	}
}
