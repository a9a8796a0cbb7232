package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"
	"golang.org/x/sync/errgroup"
)

// fakeNode is a tiny RESP server: answer(args, asking) is each command's
// reply; it records the commands it got.
type fakeNode struct {
	ln     net.Listener
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
	cfg, err := Config{App: "fake", Redis: home}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{cfg: cfg, log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		sessions: map[clientConn]struct{}{}, cmds: newCommands()}
	p.mem.max = cfg.MaxBuffer
	p.bg, p.stop = context.WithCancel(context.Background())
	p.cluster = newClusterMap(Config{}, p.log.Warn)
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
		p.stop()
		_ = g.Wait()
	})
	return ln.Addr().String()
}

// TestClusterRedirections: the proxy follows MOVED (and keeps the new owner
// in its slot table) and ASK (ASKING first), at most 5 times, and its
// client never sees a redirection it could follow.
func TestClusterRedirections(t *testing.T) {
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
	proxy := startFakeClusterProxy(t, a.addr())
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
// it is sent again, here to a node that still owes them ("self").
func TestClusterBatchRedirected(t *testing.T) {
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
	c := dialRaw(t, startFakeClusterProxy(t, a.addr()))
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
