package stacktest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RedisCluster returns the seed addresses of the local stack's Redis Cluster
// (env HOTSPOT_REDIS_CLUSTER, from `stack.sh env --redis-cluster`). Without
// it the test is skipped, also under CI=true: `make test-redis` starts the
// cluster and runs these tests in a pass of their own.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("Redis Cluster test; -short skips it")
	}
	v := os.Getenv("HOTSPOT_REDIS_CLUSTER")
	if v == "" {
		t.Skip("needs the Redis Cluster: `deployments/local/stack.sh up --redis-cluster` and `eval \"$(deployments/local/stack.sh env --redis-cluster)\"`")
	}
	return strings.Split(v, ",")
}

// RedisSentinel returns the master name and the sentinels' addresses of the
// local stack's Sentinel setup (env HOTSPOT_REDIS_SENTINEL_MASTER and
// HOTSPOT_REDIS_SENTINEL), or skips the test as RedisCluster does.
func RedisSentinel(t testing.TB) (master string, sentinels []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("Redis Sentinel test; -short skips it")
	}
	v := os.Getenv("HOTSPOT_REDIS_SENTINEL")
	if v == "" {
		t.Skip("needs the Sentinel setup: `deployments/local/stack.sh up --redis-sentinel` and `eval \"$(deployments/local/stack.sh env --redis-sentinel)\"`")
	}
	return os.Getenv("HOTSPOT_REDIS_SENTINEL_MASTER"), strings.Split(v, ",")
}

// RedisServer is a redis-server of the test's own on a free loopback port,
// which the test may stop, restart or freeze without disturbing anyone
// else's tests. Nothing is persisted.
type RedisServer struct {
	Addr string

	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// StartRedisServer starts the test's RedisServer and stops it when the test
// ends. Without redis-server installed the test is skipped, or fails under
// CI=true.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redis-server is not installed; `make up` installs it"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), t: t, port: port}
	t.Cleanup(r.Stop) // first: a server that never answers is stopped too
	r.Start()
	return r
}

// Start starts the server (again) on its port and waits until it answers a
// PING.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	r.cmd.SysProcAttr = diesWithParent()
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); !pong(r.Addr); {
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not start", r.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL): its data is lost. A test process that is
// itself killed takes the server with it (on Linux).
func (r *RedisServer) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// Pause and Resume freeze the server (SIGSTOP, SIGCONT): an outage in which
// Redis keeps its data, so old values are still there when it answers
// again.
func (r *RedisServer) Pause() { r.signal(syscall.SIGSTOP) }

// Resume ends Pause.
func (r *RedisServer) Resume() { r.signal(syscall.SIGCONT) }

func (r *RedisServer) signal(s syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(s); err != nil {
		r.t.Fatal(err)
	}
}

// pong reports whether the Redis at addr answers a PING.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}
