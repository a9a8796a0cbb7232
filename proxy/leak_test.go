package proxy

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// settledGoroutines waits (2 s at most) for the number of goroutines to
// fall to want or below and returns it, with every goroutine's stack if
// it did not.
func settledGoroutines(want int) (int, string) {
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n := runtime.NumGoroutine()
	if n <= want {
		return n, ""
	}
	buf := make([]byte, 1<<20)
	return n, string(buf[:runtime.Stack(buf, true)])
}

// TestNewFailsWithoutLeaks: when the app's SDK Client cannot be made, New
// fails and leaves nothing running, in single and in cluster mode.
func TestNewFailsWithoutLeaks(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		before := runtime.NumGoroutine()
		cfg := Config{Redis: "127.0.0.1:1", App: "leak", Brokers: []string{"127.0.0.1:1"}, KafkaSASL: "no-such-mechanism"}
		if cluster {
			cfg.RedisCluster = []string{"127.0.0.1:1"}
		}
		if _, err := New(cfg); err == nil {
			t.Fatal("New with an unknown SASL mechanism did not fail")
		}
		if n, stacks := settledGoroutines(before); stacks != "" {
			t.Errorf("cluster %v: %d goroutines before New, %d after it failed:\n%s", cluster, before, n, stacks)
		}
	}
}

// TestServeStopsEverything: once Serve returns, every goroutine the proxy
// started has ended, with a client connected through a fake Redis and in
// cluster mode with a slot table that never reads, and with shared
// upstream connections.
func TestServeStopsEverything(t *testing.T) {
	node := newFakeNode(t, func(cmd string, asking bool) string { return "+PONG\r\n" })
	for _, mode := range []string{"single", "shared", "cluster"} {
		cluster := mode == "cluster"
		before := runtime.NumGoroutine()
		cfg := Config{Redis: node.addr(), App: "leak", CommandTableWait: time.Millisecond, ShutdownGrace: 100 * time.Millisecond}
		if cluster {
			cfg.RedisCluster = []string{node.addr()}
		}
		if mode == "shared" {
			cfg.Upstream = UpstreamShared
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx, ln) }()
		c := dialRaw(t, ln.Addr().String())
		if !cluster {
			if got := string(c.do("PING")); got != "+PONG\r\n" {
				t.Errorf("PING: %q", got)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		c.close()
		if n, stacks := settledGoroutines(before); stacks != "" {
			t.Errorf("%s: %d goroutines before New, %d after Serve returned:\n%s", mode, before, n, stacks)
		}
	}
}

// TestNewAgainAfterFailure: a New that failed leaves its metrics
// unregistered, so that New may be tried again with the same Registerer;
// Serve after Close fails.
func TestNewAgainAfterFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Redis: "127.0.0.1:1", App: "again", Brokers: []string{"127.0.0.1:1"}, KafkaSASL: "no-such-mechanism", Registerer: reg}
	if _, err := New(cfg); err == nil {
		t.Fatal("New with an unknown SASL mechanism did not fail")
	}
	cfg.KafkaSASL, cfg.Brokers = "", nil
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New again with the same Registerer: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(context.Background(), ln); err == nil {
		t.Error("Serve after Close did not fail")
	}
}
