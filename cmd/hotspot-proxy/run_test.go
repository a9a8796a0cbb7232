package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestRunServesAndStops: run serves RESP, /healthz and /metrics, and when
// its context ends (SIGTERM in main) it shuts down and returns nil.
func TestRunServesAndStops(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	cfg, err := parseConfig([]string{"--app", "run-test", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--redis", redisAddr, "--zk", "", "--brokers", "", "--shutdown-grace", "1s"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, slog.New(slog.DiscardHandler), func(r, h string) { addrs <- [2]string{r, h} })
	}()
	var a [2]string
	select {
	case a = <-addrs:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	c, err := net.DialTimeout("tcp", a[0], 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "*1\r\n$4\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Errorf("PING through the proxy: %q, %v", line, err)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get("http://" + a[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return 10 s after its context ended")
	}
}
