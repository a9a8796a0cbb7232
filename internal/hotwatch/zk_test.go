package hotwatch

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// zkWriter writes shard nodes as an aggregator would, on its own connection.
type zkWriter struct {
	t    *testing.T
	conn *zk.Conn
	root string
}

func newZKWriter(t *testing.T, addr string) *zkWriter {
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	w := &zkWriter{t: t, conn: conn, root: "/" + stacktest.Name(t)}
	t.Cleanup(func() {
		deleteTree(conn, w.root)
		conn.Close()
	})
	return w
}

func deleteTree(conn *zk.Conn, p string) {
	children, _, _ := conn.Children(p)
	for _, c := range children {
		deleteTree(conn, p+"/"+c)
	}
	_ = conn.Delete(p, -1)
}

func (w *zkWriter) put(app, shard string, keys ...string) {
	w.t.Helper()
	s := &hotset.Shard{App: app, Shard: shard, Updated: time.Now().UnixMilli(), TTL: 60_000}
	for _, k := range keys {
		s.Keys = append(s.Keys, hotset.Key{Key: k, Rate: 2000})
	}
	b, err := hotset.Encode(s)
	if err != nil {
		w.t.Fatal(err)
	}
	p := hotset.ShardPath(w.root, app, shard)
	for _, dir := range []string{w.root, hotset.HotDir(w.root), hotset.AppDir(w.root, app)} {
		if _, err := w.conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			w.t.Fatal(err)
		}
	}
	if _, err := w.conn.Set(p, b, -1); errors.Is(err, zk.ErrNoNode) {
		_, err = w.conn.Create(p, b, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			w.t.Fatal(err)
		}
	} else if err != nil {
		w.t.Fatal(err)
	}
}

// waitKeys waits until app's hot keys in w are want.
func waitKeys(t *testing.T, w *Watcher, app string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := keysOf(w.Snapshot(), app)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hot keys of %s = %v, want %v", app, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runWatcher(t *testing.T, s *zkgroup.Session, cfg Config) *Watcher {
	t.Helper()
	w, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return w
}

func TestZKFollowOneAppAndAll(t *testing.T) {
	addr := stacktest.ZK(t)
	zw := newZKWriter(t, addr)
	s, err := zkgroup.Connect(t.Context(), []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	zw.put("shop", "agg-1", "a", "b")
	one := runWatcher(t, s, Config{Root: zw.root, App: "shop"})
	all := runWatcher(t, s, Config{Root: zw.root})
	<-one.Ready()
	<-all.Ready()
	waitKeys(t, one, "shop", "a", "b")
	zw.put("shop", "agg-2", "c")
	zw.put("web", "agg-1", "x")
	waitKeys(t, one, "shop", "a", "b", "c")
	waitKeys(t, all, "shop", "a", "b", "c")
	waitKeys(t, all, "web", "x")
	if got := one.Snapshot().Apps(); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("one-app watcher follows %v, want [shop]", got)
	}
	zw.put("shop", "agg-1", "b")
	waitKeys(t, all, "shop", "b", "c")
}

// proxy forwards TCP connections to a server until cut, then refuses them
// until healed: a network partition between one client and ZooKeeper.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex // guards cut and conns
	cut    bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.partition(true) })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

func (p *proxy) partition(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestZKSessionExpiry cuts the watcher off ZooKeeper for longer than its
// session timeout while the hot set changes, so the server expires the
// session; once healed, the watcher must hold the new hot set.
func TestZKSessionExpiry(t *testing.T) {
	addr := stacktest.ZK(t)
	zw := newZKWriter(t, addr)
	px := newProxy(t, addr)
	s, err := zkgroup.Connect(t.Context(), []string{px.ln.Addr().String()}, zkgroup.Config{SessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	zw.put("shop", "agg-1", "old")
	w := runWatcher(t, s, Config{Root: zw.root, App: "shop"})
	waitKeys(t, w, "shop", "old")
	expired := s.Expired()

	px.partition(true)
	zw.put("shop", "agg-1", "new")
	zw.put("shop", "agg-2", "other")
	time.Sleep(2500 * time.Millisecond) // > session timeout: the server expires the session
	if got := keysOf(w.Snapshot(), "shop"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("cut off: hot keys %v, want the last known [old]", got)
	}
	px.partition(false)
	select {
	case <-expired:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not expire")
	}
	waitKeys(t, w, "shop", "new", "other")
}
