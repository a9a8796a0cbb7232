package hotcache

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRedisLogsThroughLogger checks that go-redis's own lines about a
// Client's connections (a failed dial) reach the Client's logger.
func TestRedisLogsThroughLogger(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, WithRedis("127.0.0.1:1"), WithLogger(log), WithTimeout(50*time.Millisecond))
	_, _ = c.Get(context.Background(), "k")
	waitFor(t, "go-redis's dial error in the Client's log", func() bool {
		return strings.Contains(buf.String(), "failed to dial")
	})
	if line := buf.String(); !strings.Contains(line, "hotcache: go-redis:") {
		t.Errorf("log = %q, want go-redis's lines marked hotcache: go-redis:", line)
	}
}
