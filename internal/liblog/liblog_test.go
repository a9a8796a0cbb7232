package liblog

import (
	"bytes"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
)

// closedAddr is a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRoute makes the libraries log for real (go-redis and go-zookeeper
// failing to reach a closed port, and the log package) and checks where
// their lines go: to the logger at Debug, and nowhere at Info.
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string // in the handler's output; nil: nothing at all
	}{
		{slog.LevelDebug, []string{"component=go-redis", "failed to dial", "component=go-zookeeper", "component=log", "from the log package"}},
		{slog.LevelInfo, nil},
	} {
		var buf safeBuffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
		Route(l)

		c := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialTimeout: time.Second})
		if err := c.Ping(t.Context()).Err(); err == nil {
			t.Fatal("Ping of a closed port succeeded")
		}
		c.Close()
		conn, events, err := zk.Connect([]string{closedAddr(t)}, time.Second, zk.WithLogger(NewPrinter(l, "go-zookeeper")))
		if err != nil {
			t.Fatal(err)
		}
		// go-zookeeper logs a failed dial before it tries again: the
		// second StateConnecting follows the first failure's line.
		for connecting := 0; connecting < 2; {
			if ev := <-events; ev.State == zk.StateConnecting {
				connecting++
			}
		}
		conn.Close()
		log.Print("from the log package")

		got := buf.String()
		if tc.want == nil && got != "" {
			t.Errorf("level %v: the libraries logged %q, want nothing", tc.level, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("level %v: output lacks %q:\n%s", tc.level, w, got)
			}
		}
	}
	Route(nil)
}

// safeBuffer is a bytes.Buffer the libraries' goroutines may write to.
type safeBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
