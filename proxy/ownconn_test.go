package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestNoClientArgumentsOnOwnConnections: the proxy finds the keys of
// commands whose keys move (MIGRATE ... KEYS, SORT ... STORE, XREAD ...
// STREAMS) itself. Nothing of a client's command reaches Redis on a
// connection of the proxy's own: MIGRATE's AUTH2 password shows neither in
// MONITOR nor in SLOWLOG (Redis redacts it in the client's own command),
// and XREAD costs no round trip of its own.
func TestNoClientArgumentsOnOwnConnections(t *testing.T) {
	rs := stacktest.StartRedisServer(t)
	tp := startProxy(t, rs.Addr, nil)
	admin := newRedis(rs.Addr)
	defer admin.Close()
	ctx := context.Background()
	if err := admin.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	admin.SlowLogReset(ctx)
	mon := dialRaw(t, rs.Addr)
	defer mon.close()
	if got := string(mon.do("MONITOR")); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	c := dialRaw(t, tp.addr)
	defer c.close()
	c.do("SET", "mk", "v")
	c.do("RPUSH", "src", "2", "1")
	before := commandCalls(t, rs.Addr, "command|getkeys")
	migrate := string(c.do("MIGRATE", "127.0.0.1", "1", "", "0", "100", "AUTH2", "someuser", "secretpw", "KEYS", "mk"))
	if !strings.HasPrefix(migrate, "-IOERR") && !strings.HasPrefix(migrate, "-ERR") {
		t.Errorf("MIGRATE to a closed port: %q", migrate)
	}
	c.do("SORT", "src", "STORE", "dst")
	c.do("XADD", "st", "*", "f", "v")
	for range 10 {
		c.do("XREAD", "COUNT", "1", "STREAMS", "st", "0")
	}
	c.do("PING", "end-of-test")
	var lines []string
	for {
		line := string(mon.read())
		lines = append(lines, line)
		if strings.Contains(line, "end-of-test") {
			break
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "secretpw") {
			t.Errorf("MONITOR shows the password: %s", l)
		}
	}
	entries, err := admin.SlowLogGet(ctx, 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(strings.Join(e.Args, " "), "secretpw") {
			t.Errorf("SLOWLOG shows the password: %q", e.Args)
		}
	}
	if d := commandCalls(t, rs.Addr, "command|getkeys") - before; d != 0 {
		t.Errorf("the proxy sent COMMAND GETKEYS %d times", d)
	}
	_ = time.Second
}

// TestOwnConnectionsNamed: every connection the proxy opens for itself
// (the SDK's pool, its invalidation subscription, client tracking) is named
// hotspot-proxy in CLIENT LIST, there are few of them, and none sends HELLO
// 3 or CLIENT SETINFO.
func TestOwnConnectionsNamed(t *testing.T) {
	rs := stacktest.StartRedisServer(t)
	mon := dialRaw(t, rs.Addr)
	defer mon.close()
	if got := string(mon.do("MONITOR")); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	tp := startProxy(t, rs.Addr, nil)
	c := dialRaw(t, tp.addr)
	defer c.close()
	c.do("CLIENT", "SETNAME", "the-app")
	c.do("SET", "k", "v")
	admin := dialRaw(t, rs.Addr)
	defer admin.close()
	admin.do("CLIENT", "SETNAME", "the-test")
	var own []string
	waitUntil(t, 5*time.Second, "the proxy's tracking and invalidation connections", func() bool {
		own = own[:0]
		list := string(admin.do("CLIENT", "LIST"))
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "id=") && !strings.Contains(line, "name=the-") && !strings.Contains(line, "cmd=monitor") {
				own = append(own, line)
			}
		}
		return strings.Count(list, "flags=P") >= 2 // the SDK's invalidation and tracking subscriptions
	})
	for _, l := range own {
		if !strings.Contains(l, "name=hotspot-proxy ") {
			t.Errorf("a connection of the proxy's own not named hotspot-proxy: %s", l)
		}
	}
	if len(own) > 5 {
		t.Errorf("the proxy has %d connections of its own, want a few:\n%s", len(own), strings.Join(own, "\n"))
	}
	admin.do("PING", "end-of-test")
	for {
		line := string(mon.read())
		if strings.Contains(line, "end-of-test") {
			break
		}
		if l := strings.ToLower(line); strings.Contains(l, `"hello" "3"`) || strings.Contains(l, `"setinfo"`) {
			t.Errorf("MONITOR: %s", line)
		}
	}
}
