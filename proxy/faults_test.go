package proxy

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestFaultRedisRestart restarts a private redis-server under 8 clients
// that each read and write keys of their own through the proxy: every reply
// is its key's value, a null (the restarted server is empty), OK, or the
// connection closes; never another key's value. The proxy then serves again.
func TestFaultRedisRestart(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		rs := stacktest.StartRedisServer(t)
		tp := startProxy(t, rs.Addr, mode)
		stop := make(chan struct{})
		var wrong, good, closed atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.DialTimeout("tcp", tp.addr, time.Second)
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					rc := &rawConn{t: t, c: c, br: newReader(c)}
					for i := 0; ; i++ {
						key := fmt.Sprintf("fault:%d:%d", w, i%10)
						val := fmt.Sprintf("value-of-%s", key)
						// SET then GET pipelined: the GET's reply must be val or null.
						if _, err := c.Write(append(encode("SET", key, val), encode("GET", key)...)); err != nil {
							break
						}
						r1, err := rc.tryRead(2 * time.Second)
						if err != nil {
							break
						}
						r2, err := rc.tryRead(2 * time.Second)
						if err != nil {
							break
						}
						want := fmt.Sprintf("$%d\r\n%s\r\n", len(val), val)
						switch {
						case string(r1) == "+OK\r\n" && string(r2) == want:
							good.Add(1)
						case r1[0] == '-' || r2[0] == '-' || string(r2) == "$-1\r\n":
						default:
							wrong.Add(1)
							t.Errorf("worker %d: SET/GET %s: %q %q", w, key, r1, r2)
						}
						select {
						case <-stop:
							c.Close()
							return
						default:
						}
					}
					closed.Add(1)
					c.Close()
				}
			}()
		}
		time.Sleep(time.Second)
		before := good.Load()
		rs.Stop()
		time.Sleep(500 * time.Millisecond)
		rs.Start()
		restarted := time.Now()
		waitUntil(t, 10*time.Second, "the clients served again", func() bool { return good.Load() > before+1000 })
		t.Logf("served again %v after the restart", time.Since(restarted).Round(time.Millisecond))
		close(stop)
		wg.Wait()
		t.Logf("%d good SET/GET pairs, %d connections closed under them, %d wrong replies", good.Load(), closed.Load(), wrong.Load())
		if wrong.Load() > 0 {
			t.Fatalf("%d replies of another key or out of order", wrong.Load())
		}
		if closed.Load() == 0 {
			t.Error("no connection saw the restart")
		}
		c := dialRaw(t, tp.addr)
		defer c.close()
		if r := string(c.do("PING")); r != "+PONG\r\n" {
			t.Fatalf("PING after the restart: %q", r)
		}
	})
}

// cutter forwards TCP to target until cut.
type cutter struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	target string
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, a, b)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(a, b); a.Close() }()
			go func() { _, _ = io.Copy(b, a); b.Close() }()
		}
	}()
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) cut() {
	c.ln.Close()
	c.mu.Lock()
	for _, x := range c.conns {
		x.Close()
	}
	c.mu.Unlock()
}

// TestFaultZooKeeperAway cuts the proxy off ZooKeeper: the hot set it has
// stays (as in the SDK), and hot keys are still answered from L1. Its
// Redis is a fake, which counts the GETs that reach it.
func TestFaultZooKeeperAway(t *testing.T) {
	zkAddr, rs := stacktest.ZK(t), newFakeRedis(t)
	h := stacktest.NewHotSet(t, zkAddr)
	cut := newCutter(t, zkAddr)
	tp := startProxy(t, rs.addr(), func(c *Config) {
		c.ZooKeeper, c.ZooKeeperRoot, c.App, c.NoRedisTracking = []string{cut.addr()}, h.Root, h.App, true
	})
	key := h.App + ":hot"
	c := dialRaw(t, tp.addr)
	defer c.close()
	c.do("SET", key, "v")
	h.Set(key)
	waitUntil(t, 10*time.Second, "the key hot", func() bool { return string(c.do("HOTSPOT", "KEYS")) != "*0\r\n" })
	c.do("GET", key)
	cut.cut()
	time.Sleep(3 * time.Second)
	gets := rs.count("get")
	for range 1000 {
		if r := string(c.do("GET", key)); r != "$1\r\nv\r\n" {
			t.Fatalf("GET with ZooKeeper away: %q", r)
		}
	}
	if d := rs.count("get") - gets; d > 5 {
		t.Errorf("with ZooKeeper away for 3 s, 1000 GETs of the hot key cost Redis %d GETs, want none (hot set kept)", d)
	}
	if r := string(c.do("HOTSPOT", "KEYS")); r == "*0\r\n" {
		t.Error("the hot set was dropped with ZooKeeper away")
	}
}

// TestFaultKafkaAway points the reporter at a port nothing listens on:
// commands are served, and the reports are dropped and counted. Its Redis
// is a fake.
func TestFaultKafkaAway(t *testing.T) {
	redisAddr := newFakeRedis(t).addr()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	tp := startProxy(t, redisAddr, func(c *Config) { c.Brokers = []string{dead} })
	prefix := stacktest.Name(t) + ":"
	c := dialRaw(t, tp.addr)
	defer c.close()
	start := time.Now()
	for i := range 2000 {
		k := prefix + strconv.Itoa(i%50)
		if r := string(c.do("SET", k, "v")); r != "+OK\r\n" {
			t.Fatalf("SET with Kafka away: %q", r)
		}
	}
	t.Logf("2000 SETs with Kafka away in %v", time.Since(start).Round(time.Millisecond))
	waitUntil(t, 10*time.Second, "dropped reports counted", func() bool {
		return metricValue(t, tp.reg, "hotspot_hotcache_reporter_dropped_accesses_total", "app", "compat", "reason", "kafka") > 0
	})
}
