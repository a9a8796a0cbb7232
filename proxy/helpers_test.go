package proxy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
)

// testProxy is a proxy run in the test's process.
type testProxy struct {
	addr   string
	p      *Proxy
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// startProxy runs a proxy in front of redisAddr; mod adjusts its config
// (by default: no ZooKeeper, no Kafka, app "compat"). It returns once the
// proxy serves (it has the COMMAND table, or gave up waiting for it).
func startProxy(t testing.TB, redisAddr string, mod func(*Config)) *testProxy {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{App: "compat", Redis: redisAddr, ShutdownGrace: 2 * time.Second, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if mod != nil {
		mod(&cfg)
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
	tp := &testProxy{addr: ln.Addr().String(), p: p, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { tp.done <- p.Serve(ctx, ln) }()
	t.Cleanup(tp.stop)
	select {
	case <-p.serving:
	case err := <-tp.done:
		t.Fatalf("proxy: %v", err)
	case <-time.After(cmp.Or(cfg.CommandTableWait, 5*time.Second) + 10*time.Second):
		t.Fatal("proxy did not start")
	}
	return tp
}

func (tp *testProxy) stop() {
	if tp.cancel == nil {
		return
	}
	tp.cancel()
	tp.cancel = nil
	select {
	case <-tp.done:
	case <-time.After(10 * time.Second):
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// rawConn is a raw RESP connection: commands out, exact reply bytes in.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, c: c, br: bufio.NewReaderSize(c, 1<<20)}
}

func (r *rawConn) close() { r.c.Close() }

func encode(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

func (r *rawConn) send(args ...string) {
	r.t.Helper()
	if _, err := r.c.Write(encode(args...)); err != nil {
		r.t.Fatal(err)
	}
}

var respOptions = resp.NewOpts()

// read reads one RESP message, exactly as sent.
func (r *rawConn) read() []byte {
	r.t.Helper()
	b, err := r.tryRead(10 * time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *rawConn) tryRead(timeout time.Duration) ([]byte, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(timeout))
	var rm resp3.RawMessage
	err := rm.UnmarshalRESP(r.br, respOptions)
	return rm, err
}

func (r *rawConn) do(args ...string) []byte {
	r.t.Helper()
	r.send(args...)
	return r.read()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newRedis(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) }

// cleanKeys deletes every key under prefix (database 0) when the test ends.
func cleanKeys(t *testing.T, addr, prefix string) {
	t.Cleanup(func() {
		c := newRedis(addr)
		defer c.Close()
		ctx := context.Background()
		for _, db := range []int{0, 1} {
			c.Do(ctx, "SELECT", db)
			keys, _ := c.Keys(ctx, prefix+"*").Result()
			for _, k := range keys {
				c.Del(ctx, k)
			}
		}
	})
}

// commandCalls returns how many times Redis ran cmd (INFO commandstats).
func commandCalls(t *testing.T, addr, cmd string) int64 {
	t.Helper()
	c := newRedis(addr)
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 1<<20) }

// hammer sends the commands cmds, in turn, rounds times through the proxy at
// addr: from 4 connections, in pipelines of 100 rounds. Each reply must be
// the want of its command.
func hammer(t *testing.T, addr string, rounds int, cmds [][]string, want []string) {
	t.Helper()
	var round []byte
	for _, cmd := range cmds {
		round = append(round, encode(cmd...)...)
	}
	batch := bytes.Repeat(round, 100)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			c := dialRaw(t, addr)
			defer c.close()
			for range rounds / 4 / 100 {
				if _, err := c.c.Write(batch); err != nil {
					t.Error(err)
					return
				}
				for range 100 {
					for i, cmd := range cmds {
						if r := string(c.read()); r != want[i] {
							t.Errorf("worker %d: %s %q, want %q", w, cmd[0], r, want[i])
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// metricValue is the value of the metric name with the given label pairs
// in reg, 0 if there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// eachUpstream runs fn as a subtest per Config.Upstream mode (dedicated,
// then shared), with the Config modifier that sets it.
func eachUpstream(t *testing.T, fn func(t *testing.T, mode func(*Config))) {
	for _, m := range []string{UpstreamDedicated, UpstreamShared} {
		t.Run(m, func(t *testing.T) { fn(t, func(c *Config) { c.Upstream = m }) })
	}
}
