package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"
	"golang.org/x/sync/errgroup"
)

// fakeNode is a tiny RESP server: answer(args, asking) is each command's
// reply; it records the commands it got.
type fakeNode struct {
	ln     net.Listener
	conns  atomic.Int32 // connections accepted
	mu     sync.Mutex
	got    []string
	answer func(cmd string, asking bool) string
}

func newFakeNode(t *testing.T, answer func(cmd string, asking bool) string) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{ln: ln, answer: answer}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.conns.Add(1)
			go func() {
				defer c.Close()
				rd := redcon.NewReader(c)
				asking := false
				for {
					cmds, err := rd.ReadCommands()
					if err != nil {
						return
					}
					for _, cmd := range cmds {
						var parts []string
						for _, a := range cmd.Args {
							parts = append(parts, string(a))
						}
						s := strings.Join(parts, " ")
						n.mu.Lock()
						n.got = append(n.got, s)
						n.mu.Unlock()
						if strings.EqualFold(s, "ASKING") {
							asking = true
							_, _ = io.WriteString(c, "+OK\r\n")
							continue
						}
						_, _ = io.WriteString(c, n.answer(s, asking))
						asking = false
					}
				}
			}()
		}
	}()
	return n
}

func (n *fakeNode) addr() string { return n.ln.Addr().String() }

func (n *fakeNode) commands() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// startFakeClusterProxy serves cluster sessions whose slot table says every
// slot is home's (no COMMAND table: every command goes home).
func startFakeClusterProxy(t *testing.T, home string) string {
	return startFakeClusterProxyOf(t, home, UpstreamDedicated)
}

// startFakeClusterProxyOf is startFakeClusterProxy with the upstream mode.
func startFakeClusterProxyOf(t *testing.T, home, upstream string) string {
	cfg, err := Config{App: "fake", Redis: home, Upstream: upstream}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{cfg: cfg, log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		sessions: map[clientConn]struct{}{}, cmds: newCommands()}
	p.mem.max = cfg.MaxBuffer
	p.bg, p.stop = context.WithCancel(context.Background())
	p.cluster = newClusterMap(Config{Upstream: cfg.Upstream, UpstreamConns: cfg.UpstreamConns}, p.log.Warn)
	tb := &slotTable{masters: []string{home}}
	p.cluster.t.Store(tb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	g.Go(func() error { return p.accept(&g, ln) })
	t.Cleanup(func() {
		ln.Close()
		p.shutdown(time.Second)
		p.cluster.closeShared()
		p.stop()
		_ = g.Wait()
	})
	return ln.Addr().String()
}

// bothUpstreams runs test in a subtest per upstream mode.
func bothUpstreams(t *testing.T, test func(t *testing.T, upstream string)) {
	for _, up := range []string{UpstreamDedicated, UpstreamShared} {
		t.Run(up, func(t *testing.T) { test(t, up) })
	}
}

// TestClusterRedirections: the proxy follows MOVED (and keeps the new owner
// in its slot table) and ASK (ASKING first), at most 5 times, and its
// client never sees a redirection it could follow; with shared upstream
// connections too (a redirected command is sent again on a connection of
// the session's own).
func TestClusterRedirections(t *testing.T) { bothUpstreams(t, testClusterRedirections) }

func testClusterRedirections(t *testing.T, upstream string) {
	b := newFakeNode(t, func(cmd string, asking bool) string {
		switch {
		case cmd == "GET moved":
			return "$7\r\nfrom-b!\r\n"
		case cmd == "GET asked" && asking:
			return "$5\r\nasked\r\n"
		case cmd == "GET asked":
			return "-MOVED 7 127.0.0.1:1\r\n" // not reached if ASKING was sent
		}
		return "-ERR b\r\n"
	})
	var a *fakeNode
	a = newFakeNode(t, func(cmd string, asking bool) string {
		switch cmd {
		case "GET moved":
			return "-MOVED 3000 " + b.addr() + "\r\n"
		case "GET asked":
			return "-ASK 3001 " + b.addr() + "\r\n"
		case "GET loop":
			return "-MOVED 3002 " + a.addr() + "\r\n"
		}
		return "+PONG\r\n"
	})
	proxy := startFakeClusterProxyOf(t, a.addr(), upstream)
	c := dialRaw(t, proxy)
	defer c.close()
	if got := string(c.do("GET", "moved")); got != "$7\r\nfrom-b!\r\n" {
		t.Errorf("GET after MOVED: %q", got)
	}
	if got := string(c.do("GET", "asked")); got != "$5\r\nasked\r\n" {
		t.Errorf("GET after ASK: %q", got)
	}
	if got := string(c.do("GET", "loop")); got != "-MOVED 3002 "+a.addr()+"\r\n" {
		t.Errorf("GET redirected forever: %q, want the last MOVED", got)
	}
	if got := string(c.do("PING")); got != "+PONG\r\n" {
		t.Errorf("PING: %q", got)
	}
	gotA, gotB := strings.Join(a.commands(), "|"), strings.Join(b.commands(), "|")
	if want := "GET moved|GET asked|GET loop|GET loop|GET loop|GET loop|GET loop|GET loop|PING"; gotA != want {
		t.Errorf("node a got %s, want %s", gotA, want)
	}
	if want := "GET moved|ASKING|GET asked"; gotB != want {
		t.Errorf("node b got %s, want %s", gotB, want)
	}
}

func TestRedirectParse(t *testing.T) {
	for _, tc := range []struct {
		in, kind, addr string
		slot           int
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "MOVED", "127.0.0.1:6381", 3999},
		{"-ASK 1 10.0.0.2:7000\r\n", "ASK", "10.0.0.2:7000", 1},
		{"-MOVED 5 :7001\r\n", "MOVED", "127.0.0.1:7001", 5},
		{"-ERR MOVED 5 x:1\r\n", "", "", 0},
		{"-MOVED 99999 x:1\r\n", "", "", 0},
		{"+OK\r\n", "", "", 0},
	} {
		kind, slot, addr := redirect([]byte(tc.in))
		if kind != tc.kind || slot != tc.slot || addr != tc.addr {
			t.Errorf("redirect(%q) = %q %d %q", tc.in, kind, slot, addr)
		}
	}
}

// TestClusterBatchRedirected: a pipeline whose commands are redirected is
// answered in order: the replies after a redirected command are read before
// it is sent again, here to a node that still owes them ("self"); with
// shared upstream connections too.
func TestClusterBatchRedirected(t *testing.T) { bothUpstreams(t, testClusterBatchRedirected) }

func testClusterBatchRedirected(t *testing.T, upstream string) {
	b := newFakeNode(t, func(cmd string, asking bool) string {
		switch {
		case cmd == "GET moved":
			return "$7\r\nfrom-b!\r\n"
		case cmd == "GET asked" && asking:
			return "$5\r\nasked\r\n"
		}
		return "-ERR b\r\n"
	})
	var a *fakeNode
	selfAsked := 0
	a = newFakeNode(t, func(cmd string, asking bool) string {
		switch cmd {
		case "GET self": // moved to this very node, the first time
			if selfAsked++; selfAsked == 1 {
				return "-MOVED 3003 " + a.addr() + "\r\n"
			}
		case "GET moved":
			return "-MOVED 3000 " + b.addr() + "\r\n"
		case "GET asked":
			return "-ASK 3001 " + b.addr() + "\r\n"
		case "PING":
			return "+PONG\r\n"
		}
		k := strings.TrimPrefix(cmd, "GET ")
		return "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"
	})
	c := dialRaw(t, startFakeClusterProxyOf(t, a.addr(), upstream))
	defer c.close()
	var pipeline []byte
	for _, k := range []string{"k1", "moved", "k3", "self", "asked", "k6"} {
		pipeline = append(pipeline, encode("GET", k)...)
	}
	pipeline = append(pipeline, encode("PING")...)
	if _, err := c.c.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 7 {
		got = append(got, string(c.read()))
	}
	want := []string{"$2\r\nk1\r\n", "$7\r\nfrom-b!\r\n", "$2\r\nk3\r\n", "$4\r\nself\r\n", "$5\r\nasked\r\n",
		"$2\r\nk6\r\n", "+PONG\r\n"}
	if !slices.Equal(got, want) {
		t.Errorf("replies %q, want %q", got, want)
	}
	if got, want := strings.Join(b.commands(), "|"), "GET moved|ASKING|GET asked"; got != want {
		t.Errorf("node b got %s, want %s", got, want)
	}
}

// TestClusterUnsubscribe: (P)UNSUBSCRIBE outside pipe mode is answered by
// one message per channel (one without), and the replies after it stay
// paired with their commands.
func TestClusterUnsubscribe(t *testing.T) {
	node := newFakeNode(t, func(cmd string, asking bool) string {
		switch cmd {
		case "UNSUBSCRIBE a b":
			return "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"
		case "PUNSUBSCRIBE":
			return "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
		}
		return "+PONG\r\n"
	})
	c := dialRaw(t, startFakeClusterProxy(t, node.addr()))
	defer c.close()
	if _, err := c.c.Write(append(append(encode("UNSUBSCRIBE", "a", "b"), encode("PUNSUBSCRIBE")...), encode("PING")...)); err != nil {
		t.Fatal(err)
	}
	want := []string{"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n", "*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n",
		"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n", "+PONG\r\n"}
	for i, w := range want {
		if got := string(c.read()); got != w {
			t.Errorf("message %d: %q, want %q", i, got, w)
		}
	}
}

// TestClusterSharedConnections: with shared upstream connections, 20
// clients pipelining GETs through the proxy reach the master over its 2
// shared connections, each getting its own replies in order. A client that
// names its connection (CLIENT SETNAME) moves to one of its own: what it
// sent before is answered first, and what follows goes there.
func TestClusterSharedConnections(t *testing.T) {
	node := newFakeNode(t, func(cmd string, _ bool) string {
		if k, ok := strings.CutPrefix(cmd, "GET "); ok {
			return "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"
		}
		return "+OK\r\n"
	})
	addr := startFakeClusterProxyOf(t, node.addr(), UpstreamShared)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			for round := range 20 {
				var req, want []byte
				for j := range 50 {
					k := fmt.Sprintf("c%d:%d:%d", i, round, j)
					req = append(req, encode("GET", k)...)
					want = fmt.Appendf(want, "$%d\r\n%s\r\n", len(k), k)
				}
				if _, err := c.Write(req); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(want))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
					t.Errorf("client %d, round %d: %q, %v; want its own replies %q", i, round, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := node.conns.Load(); n > 2 {
		t.Fatalf("the master accepted %d connections from 20 clients, want the 2 shared ones", n)
	}
	c := dialRaw(t, addr)
	defer c.close()
	pipeline := append(append(encode("GET", "before"), encode("CLIENT", "SETNAME", "mine")...), encode("GET", "after")...)
	if _, err := c.c.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"$6\r\nbefore\r\n", "+OK\r\n", "$5\r\nafter\r\n"} {
		if got := string(c.read()); got != want {
			t.Errorf("after moving to its own connection: %q, want %q", got, want)
		}
	}
	if n := node.conns.Load(); n != 3 {
		t.Errorf("the master accepted %d connections, want the 2 shared ones and the client's own", n)
	}
	cmds := node.commands()
	if i, j, k := slices.Index(cmds, "GET before"), slices.Index(cmds, "CLIENT SETNAME mine"), slices.Index(cmds, "GET after"); i < 0 || i > j || j > k {
		t.Errorf("the master ran GET before at %d, CLIENT SETNAME at %d, GET after at %d: want that order", i, j, k)
	}
}
