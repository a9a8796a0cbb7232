package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// shared puts the proxy on n shared upstream connections.
func shared(n int) func(*Config) {
	return func(c *Config) { c.Upstream, c.UpstreamConns = UpstreamShared, n }
}

// interleave has clients connections each send rounds pipelines of
// SET/GET/GET of keys and values of its own, all at once, and checks every
// reply; it returns the keys set.
func interleave(t *testing.T, addr, prefix string, clients, rounds int) []string {
	t.Helper()
	var wg sync.WaitGroup
	keys := make([]string, clients)
	for w := range clients {
		keys[w] = fmt.Sprintf("%sc%d", prefix, w)
		wg.Go(func() {
			c := dialRaw(t, addr)
			defer c.close()
			for r := range rounds {
				var batch []byte
				var want []string
				for i := range 20 {
					v := fmt.Sprintf("v-%d-%d-%d", w, r, i)
					batch = append(batch, encode("SET", keys[w], v)...)
					batch = append(batch, encode("GET", keys[w])...)
					batch = append(batch, encode("GET", keys[w]+":none")...)
					want = append(want, "+OK\r\n", string(bulk(v)), "$-1\r\n")
				}
				if _, err := c.c.Write(batch); err != nil {
					t.Error(err)
					return
				}
				for i, wr := range want {
					got, err := c.tryRead(10 * time.Second)
					if err != nil {
						t.Errorf("client %d, round %d, reply %d: %v", w, r, i, err)
						return
					}
					if string(got) != wr {
						t.Errorf("client %d, round %d, reply %d: %q, want %q", w, r, i, got, wr)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return keys
}

// TestSharedPipelinesInterleaved: 24 clients pipelining at once through 2
// shared connections to a fake Redis each get their own replies, in
// order, and Redis sees 2 connections set their keys, not 24.
func TestSharedPipelinesInterleaved(t *testing.T) {
	f := newFakeRedis(t)
	tp := startProxy(t, f.addr(), shared(2))
	keys := interleave(t, tp.addr, "mux:", 24, 30)
	if n := f.setters(keys); n > 2 {
		t.Fatalf("%d upstream connections set the 24 clients' keys, want at most 2", n)
	}
}

// TestSharedPipelinesRedis: the same against the real Redis; CLIENT ID
// through the proxy then names one of the 2 shared connections.
func TestSharedPipelinesRedis(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, shared(2))
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	interleave(t, tp.addr, prefix, 16, 20)
	ids := map[string]bool{}
	for range 8 {
		c := dialRaw(t, tp.addr)
		ids[string(c.do("CLIENT", "ID"))] = true
		defer c.close()
	}
	if len(ids) > 2 {
		t.Fatalf("CLIENT ID from 8 clients: %d connections, want at most the 2 shared ones", len(ids))
	}
}

// TestSharedMovesToDedicated: a client whose connection acquires state gets
// an upstream connection of its own, and it, and a client on the shared
// connection meanwhile (the bystander), see exactly what they see directly
// on Redis: the state does not leak onto the shared connection, and the
// commands pipelined before the state change run before it.
func TestSharedMovesToDedicated(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, shared(1))
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)

	// run runs fn with a bystander connection to the same server as c, and
	// checks that c ends on a connection other than the bystander's.
	run := func(t *testing.T, fn func(c, by *rawConn, p string) [][]byte) {
		runBoth(t, redisAddr, tp.addr, prefix, func(c *rawConn, p string) [][]byte {
			by := dialRaw(t, c.c.RemoteAddr().String())
			defer by.close()
			by.do("PING")
			out := fn(c, by, p)
			if id, byID := c.do("CLIENT", "ID"), by.do("CLIENT", "ID"); bytes.Equal(id, byID) {
				t.Errorf("after the state change, the client is still on the bystander's connection %q", id)
			}
			return out
		})
	}
	pipeline := func(c *rawConn, cmds ...[]string) [][]byte {
		var b []byte
		for _, cmd := range cmds {
			b = append(b, encode(cmd...)...)
		}
		if _, err := c.c.Write(b); err != nil {
			t.Fatal(err)
		}
		out := make([][]byte, len(cmds))
		for i := range out {
			out[i] = c.read()
		}
		return out
	}
	// sets are many SETs of 4 KiB values ahead of a state change in the
	// same pipeline: the shared connection is busy with them when the
	// client needs its own.
	sets := func(p string) [][]string {
		var cmds [][]string
		for i := range 300 {
			cmds = append(cmds, []string{"SET", p + "bulk" + strconv.Itoa(i), strings.Repeat("x", 4096)})
		}
		return cmds
	}

	t.Run("multi", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			out := pipeline(c, append(sets(p), []string{"SET", p + "k", "before"}, []string{"MULTI"},
				[]string{"GET", p + "k"}, []string{"INCR", p + "n"})...)
			out = append(out, by.do("SET", p+"by", "1"), by.do("GET", p+"by")) // +QUEUED if MULTI were shared
			return append(out, c.do("EXEC"), c.do("GET", p+"n"))
		})
	})
	t.Run("select", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			out := pipeline(c, append(sets(p), []string{"SET", p + "k", "db0"}, []string{"SELECT", "2"},
				[]string{"GET", p + "k"}, []string{"SET", p + "k", "db2"})...)
			out = append(out, by.do("GET", p+"k")) // db2 if SELECT were shared
			return append(out, c.do("GET", p+"k"), c.do("DEL", p+"k"), c.do("SELECT", "0"), c.do("GET", p+"k"))
		})
	})
	t.Run("subscribe", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			out := pipeline(c, append(sets(p), []string{"SUBSCRIBE", p + "ch"})...)
			out = append(out, by.do("PING"), by.do("PUBLISH", p+"ch", "hi")) // a subscriber's PONG if shared
			out = append(out, c.read(), c.do("PING"), c.do("UNSUBSCRIBE"), c.do("SET", p+"after", "1"))
			return out
		})
	})
	t.Run("hello3", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			out := [][]byte{redactHello(c.do("HELLO", "3"))}
			out = append(out, by.do("GET", p+"none"), by.do("HGETALL", p+"none")) // RESP3 blanks if shared
			return append(out, c.do("GET", p+"none"), c.do("HGETALL", p+"none"))
		})
	})
	t.Run("setname", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			out := [][]byte{c.do("CLIENT", "SETNAME", "moved"), by.do("CLIENT", "GETNAME")}
			return append(out, c.do("CLIENT", "GETNAME"))
		})
	})
	t.Run("blpop", func(t *testing.T) {
		run(t, func(c, by *rawConn, p string) [][]byte {
			c.send("BLPOP", p+"q", "5")
			time.Sleep(100 * time.Millisecond)
			by.send("SET", p+"by", "1")
			r, err := by.tryRead(2 * time.Second) // behind the BLPOP if it were shared
			if err != nil {
				t.Fatalf("a SET waited for another client's BLPOP: %v", err)
			}
			out := [][]byte{r, by.do("RPUSH", p+"q", "job")}
			return append(out, c.read())
		})
	})
}

// TestSharedUpstreamKilled: a shared connection dies in the middle of a
// pipeline (the fake closes it at ECHO die, as Redis killed there would),
// again and again, while 8 clients pipeline reads of values of their own on
// it. No client ever gets a reply that is not its own: the victim gets the
// replies before ECHO die and then its connection closed; a client with
// commands in flight gets its connection closed; a client idle on the
// connection when it died goes on, on the pool's new one.
func TestSharedUpstreamKilled(t *testing.T) {
	f := newFakeRedis(t)
	tp := startProxy(t, f.addr(), shared(1))
	idle := dialRaw(t, tp.addr)
	defer idle.close()
	if r := string(idle.do("SET", "kill:idle", "mine")); r != "+OK\r\n" {
		t.Fatalf("SET: %q", r)
	}

	stop := ownReplies(t, tp.addr, "kill:", 8)

	for i := range 20 {
		// The SET may meet the connection the last round killed, before
		// the proxy has seen it closed: then the client's connection is
		// closed, and it connects again.
		var v *rawConn
		for v == nil {
			v = dialRaw(t, tp.addr)
			v.send("SET", "kill:victim", "v"+strconv.Itoa(i))
			if r, err := v.tryRead(10 * time.Second); err != nil {
				v.close()
				v = nil
			} else if string(r) != "+OK\r\n" {
				t.Fatalf("round %d: SET %q", i, r)
			}
		}
		got := [][]byte{}
		v.send("GET", "kill:victim")
		v.send("ECHO", "die")
		v.send("GET", "kill:victim")
		var end error
		for {
			r, err := v.tryRead(10 * time.Second)
			if err != nil {
				end = err
				break
			}
			got = append(got, r)
		}
		v.close()
		if want := bulk("v" + strconv.Itoa(i)); len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("round %d: the victim got %q then %v, want %q then its connection closed", i, got, end, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	served, closed := stop()
	t.Logf("%d replies to the other clients; %d of their connections closed under them", served, closed)
	if r := string(idle.do("GET", "kill:idle")); r != string(bulk("mine")) {
		t.Fatalf("the idle client after 20 kills: %q", r)
	}
	f.mu.Lock()
	conns := f.conns
	f.mu.Unlock()
	if conns < 20 {
		t.Fatalf("the fake accepted %d connections: the pool did not reconnect", conns)
	}
}

// TestUpstreamConfig: Config.Upstream is dedicated by default, shared
// takes 2 connections by default, and shared is refused in cluster mode.
func TestUpstreamConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		want  string
		conns int
		err   bool
	}{
		{cfg: Config{}, want: UpstreamDedicated, conns: 2},
		{cfg: Config{Upstream: UpstreamShared}, want: UpstreamShared, conns: 2},
		{cfg: Config{Upstream: UpstreamShared, UpstreamConns: 5}, want: UpstreamShared, conns: 5},
		{cfg: Config{Upstream: "pooled"}, err: true},
		{cfg: Config{UpstreamConns: -1}, err: true},
		{cfg: Config{Upstream: UpstreamShared, RedisCluster: []string{"c:1"}}, want: UpstreamShared, conns: 2},
	} {
		tc.cfg.App, tc.cfg.Redis = "a", "r:1"
		got, err := tc.cfg.withDefaults()
		switch {
		case tc.err && err == nil:
			t.Errorf("%+v: no error", tc.cfg)
		case !tc.err && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case !tc.err && (got.Upstream != tc.want || got.UpstreamConns != tc.conns):
			t.Errorf("%q, %d: got %q, %d; want %q, %d", tc.cfg.Upstream, tc.cfg.UpstreamConns, got.Upstream, got.UpstreamConns, tc.want, tc.conns)
		}
	}
}

// ownReplies has clients connections pipeline GETs of values of their own
// through addr, each connecting again whenever its connection is closed
// under it, until stop is called; a reply that is not the client's own
// fails the test. stop returns the replies they got and how many of their
// connections were closed under commands.
func ownReplies(t *testing.T, addr, prefix string, clients int) (stop func() (served, closed int)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the proxy stops, after a Fatal too
	var mu sync.Mutex
	closed, served := 0, 0
	for w := range clients {
		wg.Go(func() {
			key, val := fmt.Sprintf("%sc%d", prefix, w), fmt.Sprintf("value-of-%d", w)
			batch := bytes.Repeat(encode("GET", key), 50)
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					t.Errorf("client %d: %v", w, err)
					return
				}
				c := &rawConn{t: t, c: nc, br: newReader(nc)}
				if _, err := c.c.Write(encode("SET", key, val)); err != nil {
					t.Errorf("client %d: %v", w, err)
					return
				}
				if r, err := c.tryRead(10 * time.Second); err != nil || string(r) != "+OK\r\n" {
					if err == nil { // closed under it is fine; any other reply is not
						t.Errorf("client %d: SET %q", w, r)
					}
					c.close()
					continue
				}
				for ctx.Err() == nil {
					if _, err := c.c.Write(batch); err != nil {
						break
					}
					n, err := 0, error(nil)
					for ; n < 50; n++ {
						var r []byte
						if r, err = c.tryRead(10 * time.Second); err != nil {
							break
						}
						if string(r) != string(bulk(val)) {
							t.Errorf("client %d: GET %q, want %q", w, r, bulk(val))
							cancel()
							return
						}
					}
					mu.Lock()
					served += n
					if err != nil {
						closed++
					}
					mu.Unlock()
					if err != nil {
						if !errors.Is(err, io.EOF) && !isNetErr(err) {
							t.Errorf("client %d: %v", w, err)
						}
						break
					}
				}
				c.close()
			}
		})
	}
	return func() (int, int) {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return served, closed
	}
}

// TestSharedUpstreamKilledRedis: Redis itself kills the shared connection
// (CLIENT KILL ID), 10 times, while 8 clients pipeline GETs of values of
// their own on it: each gets only its own replies, and the proxy serves on
// a new shared connection after each kill.
func TestSharedUpstreamKilledRedis(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, shared(1))
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	stop := ownReplies(t, tp.addr, prefix, 8)
	admin := newRedis(redisAddr)
	defer admin.Close()
	killed := map[string]bool{}
	for len(killed) < 10 {
		c := dialRaw(t, tp.addr)
		c.send("CLIENT", "ID")
		r, err := c.tryRead(10 * time.Second) // fails if it met the connection just killed
		c.close()
		if err != nil {
			continue
		}
		id := strings.TrimSpace(string(r[1:]))
		if r[0] != ':' || killed[id] {
			t.Fatalf("CLIENT ID through the proxy: %q, after the connections %v were killed", r, killed)
		}
		if n, err := admin.Do(context.Background(), "CLIENT", "KILL", "ID", id).Int(); err != nil || n != 1 {
			t.Fatalf("CLIENT KILL ID %s: %d %v", id, n, err)
		}
		killed[id] = true
		time.Sleep(30 * time.Millisecond)
	}
	served, closed := stop()
	t.Logf("%d replies; %d connections closed under commands in flight", served, closed)
}

// TestSharedQuit: QUIT in a pipeline on a shared connection is answered as
// Redis answers it (+OK after the replies before it, nothing after it runs,
// the client's connection closes) without closing the shared connection
// under another client.
func TestSharedQuit(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, shared(1))
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	by := dialRaw(t, tp.addr)
	defer by.close()
	id := string(by.do("CLIENT", "ID"))
	c := dialRaw(t, tp.addr)
	defer c.close()
	if _, err := c.c.Write(append(append(encode("SET", prefix+"k", "v"), encode("QUIT")...), encode("SET", prefix+"k", "after")...)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		r, err := c.tryRead(10 * time.Second)
		if err != nil {
			if !errors.Is(err, io.EOF) && !isNetErr(err) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(r))
	}
	if strings.Join(got, "") != "+OK\r\n+OK\r\n" {
		t.Fatalf("SET, QUIT, SET: %q, want +OK, +OK, then the connection closed", got)
	}
	if r := string(by.do("GET", prefix+"k")); r != string(bulk("v")) {
		t.Fatalf("GET after the QUIT: %q (the SET after QUIT ran?)", r)
	}
	if r := string(by.do("CLIENT", "ID")); r != id {
		t.Fatalf("the bystander's shared connection %q became %q: QUIT closed it", id, r)
	}
}

// TestSharedRedialOnceBack: while Redis is down, each slot answers its
// failed dial's error for redialAfter instead of dialling again; once a
// dial works on one slot, the others dial at once (Jedis's PING, right
// after a restart, landed on a slot still answering the outage's error).
func TestSharedRedialOnceBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &Proxy{cfg: Config{Redis: addr}}
	sp := newSharedPool(2, p.dialUpstream)
	defer sp.close()
	if _, err := sp.conn(0); err == nil {
		t.Fatal("slot 0 dialled a Redis that is down")
	}
	time.Sleep(redialAfter)
	if _, err := sp.conn(1); err == nil {
		t.Fatal("slot 1 dialled a Redis that is down")
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	if _, err := sp.conn(0); err != nil {
		t.Fatalf("slot 0, redialAfter after its failed dial: %v", err)
	}
	if _, err := sp.conn(1); err != nil {
		t.Fatalf("slot 1, within redialAfter of its failed dial but after slot 0 dialled Redis: %v", err)
	}
}
