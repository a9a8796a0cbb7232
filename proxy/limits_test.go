package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// exchange writes in on a new connection to addr and returns what comes
// back until the connection closes (closed) or is quiet for quiet.
func exchange(t *testing.T, addr string, in []byte, quiet time.Duration) (out []byte, closed bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write(in) }() // a peer that closes early may leave part of it unread
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return out, false
		case errors.Is(err, io.EOF), err != nil && strings.Contains(err.Error(), "reset"):
			return out, true
		case err != nil:
			t.Fatal(err)
		}
	}
}

// protocolCases are requests Redis refuses or takes in ways of its own.
var protocolCases = []struct {
	name string
	in   []byte
}{
	{"inline of 70,000 bytes without a newline", bytes.Repeat([]byte("x"), 70_000)},
	{"multibulk count past INT_MAX", []byte("*3000000000\r\n")},
	{"negative multibulk count", []byte("*-5\r\nPING\r\n")},
	{"multibulk count not a number", []byte("*abc\r\n")},
	{"multibulk count with a leading zero", []byte("*01\r\n$4\r\nPING\r\n")},
	{"bulk length past proto-max-bulk-len", []byte("*1\r\n$2000000000\r\n")},
	{"bulk length 512 MB + 1", []byte("*1\r\n$536870913\r\n")},
	{"negative bulk length", []byte("*1\r\n$-1\r\n")},
	{"not a bulk", []byte("*1\r\n+PING\r\n")},
	{"mbulk count line of 70,000 bytes", append([]byte("*"), bytes.Repeat([]byte("1"), 70_000)...)},
	{"bulk count line of 70,000 bytes", append([]byte("*1\r\n$"), bytes.Repeat([]byte("1"), 70_000)...)},
	{"unbalanced quotes", []byte("\"unbalanced\r\nPING\r\n")},
	{"inline then multibulk", []byte("PING\r\n*1\r\n$4\r\nPING\r\n")},
	{"empty lines and an empty multibulk", []byte("\r\n*0\r\nPING\r\n")},
	{"inline quoting", []byte("ECHO \"a\\x41b\\n\" 'it\\'s'\r\nECHO \"\"\r\n")},
	{"argument's trailing bytes unchecked", []byte("*2\r\n$4\r\nECHOxx$1\r\nz\r\n")},
	{"a command before the error runs", []byte("*1\r\n$4\r\nPING\r\n*abc\r\n*1\r\n$4\r\nPING\r\n")},
}

// TestProtocolLikeRedis sends each of protocolCases to Redis directly and
// through the proxy: the same bytes come back, and the connection closes
// where Redis closes it.
func TestProtocolLikeRedis(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, nil)
	for _, tc := range protocolCases {
		t.Run(tc.name, func(t *testing.T) {
			want, wantClosed := exchange(t, redisAddr, tc.in, 300*time.Millisecond)
			got, gotClosed := exchange(t, tp.addr, tc.in, 300*time.Millisecond)
			if !bytes.Equal(got, want) || gotClosed != wantClosed {
				t.Errorf("through the proxy %q (closed %v), directly %q (closed %v)", got, gotClosed, want, wantClosed)
			}
		})
	}
}

// TestBufferBudget: a client's command past Config.MaxClientBuffer, or one
// that would take every client's buffers past Config.MaxBuffer, is refused
// and its connection closed, before it is read; the proxy's buffered bytes
// stay within MaxBuffer, and the refusals are counted. Redis is a fake.
func TestBufferBudget(t *testing.T) {
	rs := newFakeRedis(t)
	tp := startProxy(t, rs.addr(), func(c *Config) { c.MaxClientBuffer, c.MaxBuffer = 1<<20, 1<<20+512<<10 })
	// One command of 2 MiB: refused once its length is read.
	got, closed := exchange(t, tp.addr, []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2097152\r\nabc"), time.Second)
	if string(got) != string(overBudgetReply) || !closed {
		t.Errorf("a command of 2 MiB with a bound of 1 MiB per client: %q, closed %v", got, closed)
	}
	// Two clients, each with 900 KiB of a command under way: the second
	// passes the proxy's bound.
	part := append([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$922200\r\n"), bytes.Repeat([]byte("v"), 900<<10)...)
	a, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Write(part); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the first client's bytes buffered", func() bool {
		return metricValue(t, tp.reg, "hotspot_proxy_buffered_bytes") >= 900<<10
	})
	got, closed = exchange(t, tp.addr, part, time.Second)
	if string(got) != string(overBudgetReply) || !closed {
		t.Errorf("a second client past the proxy's bound: %q, closed %v", got, closed)
	}
	if b := metricValue(t, tp.reg, "hotspot_proxy_buffered_bytes"); b > 1<<20+512<<10 {
		t.Errorf("hotspot_proxy_buffered_bytes %v, over the bound", b)
	}
	if n := metricValue(t, tp.reg, "hotspot_proxy_buffer_refused_total"); n != 2 {
		t.Errorf("hotspot_proxy_buffer_refused_total %v, want 2", n)
	}
	// The first client finishes its command: served.
	if _, err := a.Write(append(bytes.Repeat([]byte("v"), 600), "\r\n"...)); err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{t: t, c: a, br: newReader(a)}
	if got := string(rc.read()); got != "+OK\r\n" {
		t.Errorf("the first client's SET: %q", got)
	}
}

// TestInlineFloodBounded: 32 MiB of an inline command without a newline
// cost the proxy at most its 64 KiB limit (and a read's worth): the client
// gets Redis' error and a close, and the proxy's buffers are back to
// nothing. Redis is a fake.
func TestInlineFloodBounded(t *testing.T) {
	tp := startProxy(t, newFakeRedis(t).addr(), nil)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 32 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if string(got) != "-ERR Protocol error: too big inline request\r\n" || (err != nil && !isNetErr(err) && !errors.Is(err, os.ErrDeadlineExceeded)) {
		t.Errorf("32 MiB inline: %q, %v", got, err)
	}
	waitUntil(t, 5*time.Second, "the buffers released", func() bool {
		return metricValue(t, tp.reg, "hotspot_proxy_buffered_bytes") == 0
	})
}

// TestClusterProtocolErrors: the cluster session answers protocol errors as
// Redis does too, after the replies before them, and closes. Its node is a
// fake.
func TestClusterProtocolErrors(t *testing.T) {
	node := newFakeNode(t, func(cmd string, asking bool) string { return "+PONG\r\n" })
	proxy := startFakeClusterProxy(t, node.addr())
	for _, tc := range []struct{ in, want string }{
		{"*3000000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$4\r\nPING\r\n*abc\r\n", "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$2000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{string(bytes.Repeat([]byte("x"), 70_000)), "-ERR Protocol error: too big inline request\r\n"},
	} {
		got, closed := exchange(t, proxy, []byte(tc.in), time.Second)
		if string(got) != tc.want || !closed {
			t.Errorf("%.20q: %q, closed %v; want %q and a close", tc.in, got, closed, tc.want)
		}
	}
}
