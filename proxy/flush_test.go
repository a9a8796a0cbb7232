package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestQuitInAPipeline: SET, QUIT, SET in one write get +OK +OK and a close,
// as from Redis, and the SET after QUIT does not run.
func TestQuitInAPipeline(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, nil)
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	rdb := newRedis(redisAddr)
	defer rdb.Close()
	in := append(append(encode("SET", prefix+"a", "1"), encode("QUIT")...), encode("SET", prefix+"foo", "bar")...)
	for _, addr := range []string{redisAddr, tp.addr} {
		got, closed := exchange(t, addr, in, 2*time.Second)
		if string(got) != "+OK\r\n+OK\r\n" || !closed {
			t.Errorf("%s: %q, closed %v; want +OK +OK and a close", addr, got, closed)
		}
		if n := rdb.Exists(context.Background(), prefix+"foo").Val(); n != 0 {
			t.Errorf("%s: the SET after QUIT ran", addr)
		}
	}
}

// TestReplyNotHeldByABlockingCommand: SET and BLPOP sent together: the
// SET's +OK comes at once, not when BLPOP returns.
func TestReplyNotHeldByABlockingCommand(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, nil)
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	c := dialRaw(t, tp.addr)
	defer c.close()
	if _, err := c.c.Write(append(encode("SET", prefix+"a", "1"), encode("BLPOP", prefix+"nolist", "3")...)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := c.tryRead(time.Second)
	if err != nil || string(got) != "+OK\r\n" {
		t.Fatalf("SET's reply within a second of SET + BLPOP: %q, %v", got, err)
	}
	t.Logf("+OK after %v", time.Since(start).Round(time.Millisecond))
	if got := string(c.read()); got != "*-1\r\n" {
		t.Errorf("BLPOP: %q", got)
	}
}

// TestClusterQuit: in cluster mode too, QUIT in a pipeline answers what
// came before it, +OK, and closes; nothing after it is sent.
func TestClusterQuit(t *testing.T) {
	node := newFakeNode(t, func(cmd string, asking bool) string { return "+OK\r\n" })
	proxy := startFakeClusterProxy(t, node.addr())
	in := append(append(encode("SET", "a", "1"), encode("QUIT")...), encode("SET", "foo", "bar")...)
	got, closed := exchange(t, proxy, in, 2*time.Second)
	if string(got) != "+OK\r\n+OK\r\n" || !closed {
		t.Errorf("%q, closed %v; want +OK +OK and a close", got, closed)
	}
	if cmds := node.commands(); slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "foo") }) {
		t.Errorf("the node got %q", cmds)
	}
}
