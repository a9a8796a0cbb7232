// Package stacktest gives integration tests the addresses of the real local
// stack (Kafka, ZooKeeper, Redis) that deployments/local/stack.sh starts.
//
// A test that needs a service calls Kafka, ZK or Redis first. When the
// service does not answer, the test is skipped, except under CI=true, where it
// fails: CI must never pass by skipping the tests that prove the product.
package stacktest

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka returns the broker address (env HOTSPOT_KAFKA, default 127.0.0.1:19092).
func Kafka(t testing.TB) string { return need(t, "HOTSPOT_KAFKA", "127.0.0.1:19092", "Kafka") }

// ZK returns the ZooKeeper address (env HOTSPOT_ZK, default 127.0.0.1:12181).
func ZK(t testing.TB) string { return need(t, "HOTSPOT_ZK", "127.0.0.1:12181", "ZooKeeper") }

// Redis returns the Redis address (env HOTSPOT_REDIS, default 127.0.0.1:16379).
func Redis(t testing.TB) string { return need(t, "HOTSPOT_REDIS", "127.0.0.1:16379", "Redis") }

var (
	zkMu    sync.Mutex                  // guards zkConns
	zkConns = map[testing.TB]*zk.Conn{} // one per running test, see ZKConn
)

// ZKConn returns a raw ZooKeeper connection of the test's own, for checking
// ZooKeeper's side of what the code under test did. Repeated calls in one
// test return the same connection; it is closed when the test ends.
func ZKConn(t testing.TB) *zk.Conn {
	t.Helper()
	addr := ZK(t)
	zkMu.Lock()
	defer zkMu.Unlock()
	if c := zkConns[t]; c != nil {
		return c
	}
	c, _, err := zk.Connect(strings.Split(addr, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("ZooKeeper at %s: %v", addr, err)
	}
	zkConns[t] = c
	t.Cleanup(func() {
		zkMu.Lock()
		delete(zkConns, t)
		zkMu.Unlock()
		c.Close()
	})
	return c
}

var seq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// Name returns a name unique to this test run, usable as a Kafka topic, a
// znode name or a Redis key prefix.
func Name(t testing.TB) string {
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(base) > 60 {
		base = base[:60]
	}
	return fmt.Sprintf("t-%s-%d-%d-%d", base, os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
}

func need(t testing.TB, env, def, what string) string {
	t.Helper()
	addr := os.Getenv(env)
	if addr == "" {
		addr = def
	}
	first, _, _ := strings.Cut(addr, ",") // a cluster's list (stack.sh env --cluster)
	conn, err := net.DialTimeout("tcp", first, 2*time.Second)
	if err != nil {
		msg := fmt.Sprintf("%s is not reachable at %s (%v); start it with `make up`", what, addr, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	conn.Close()
	return addr
}
