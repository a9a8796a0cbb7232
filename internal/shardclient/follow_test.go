package shardclient_test

import (
	"context"
	"net"
	"net/http"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/internal/shardclient"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/internal/zkpublish"
	"github.com/hotspot-dev/hotspot/shardapi"
)

func deleteTree(conn *zk.Conn, p string) {
	kids, _, _ := conn.Children(p)
	for _, k := range kids {
		deleteTree(conn, path.Join(p, k))
	}
	_ = conn.Delete(p, -1)
}

// liveShard is an aggregator registered in ZooKeeper and serving HTTP.
type liveShard struct {
	agg  *aggregator.Aggregator
	stop func()
}

func startLiveShard(t *testing.T, s *zkgroup.Session, root, id string) *liveShard {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := zkpublish.New(s, zkpublish.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	a, err := aggregator.New(aggregator.Config{ID: id, Addr: ln.Addr().String()}, pub)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ls := &liveShard{agg: a}
	stopped := false
	ls.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run = %v", id, err)
		}
		srv.Close()
	}
	t.Cleanup(ls.stop)
	return ls
}

func TestFollowMembershipAndReroute(t *testing.T) {
	t.Parallel()
	addr := stacktest.ZK(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	root := "/" + stacktest.Name(t)
	// Registered first, so it runs after the shards' cleanups have stopped them.
	conn := stacktest.ZKConn(t) // closed after the cleanup below
	t.Cleanup(func() { deleteTree(conn, root); s.Close() })

	a1 := startLiveShard(t, s, root, "agg-1")
	a2 := startLiveShard(t, s, root, "agg-2")
	c, err := shardclient.New(shardclient.Config{Root: root, Source: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- c.Follow(followCtx, s) }()
	defer func() {
		stopFollow()
		if err := <-followed; err != nil {
			t.Errorf("Follow = %v", err)
		}
	}()

	waitMembers := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var ids []string
			for _, n := range c.Members() {
				ids = append(ids, n.ID)
			}
			if slices.Equal(ids, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("members = %v, want %v", ids, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitMembers("agg-1", "agg-2")

	cs := counts(200)
	if err := c.Send(ctx, shardapi.Flush{At: time.Now()}, cs); err != nil {
		t.Fatal(err)
	}
	own := owners(t, cs, "agg-1", "agg-2")
	for i, o := range own {
		_, at1 := a1.agg.Key(cs[i].App, cs[i].Key)
		_, at2 := a2.agg.Key(cs[i].App, cs[i].Key)
		if at1 != (o == "agg-1") || at2 != (o == "agg-2") {
			t.Fatalf("%s/%s: at agg-1 %v, at agg-2 %v; owner %s", cs[i].App, cs[i].Key, at1, at2, o)
		}
	}

	// agg-1 leaves the group: the ring drops it and its keys go to agg-2.
	a1.stop()
	waitMembers("agg-2")
	if err := c.Send(ctx, shardapi.Flush{At: time.Now()}, cs); err != nil {
		t.Fatal(err)
	}
	for i, o := range own {
		// agg-1's keys were not at agg-2 before (checked above).
		st, ok := a2.agg.Key(cs[i].App, cs[i].Key)
		if !ok || st.Rate < float64(cs[i].N) {
			t.Fatalf("%s/%s (owner was %s) at agg-2 after agg-1 left: rate %v (tracked %v), want >= %d",
				cs[i].App, cs[i].Key, o, st.Rate, ok, cs[i].N)
		}
	}
}
