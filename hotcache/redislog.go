package hotcache

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger (redis.SetLogger), by
// default to stderr: during an outage every failed dial prints a line. So
// New installs, once per process, a logger that sends each line to the
// logger of the Client it is about (WithLogger; nil discards it, and lines
// go out at Debug level: the breaker's state changes are the Info lines)
// and any other line to stderr as go-redis's default does. A line is about
// a Client when the context it is logged with was made by redisCtx (every
// Redis call of the Client runs in one) or when it quotes a dial error of a
// connection the Client's own dialer opened (go-redis dials some connections
// in the background, with no context of ours). An app that calls
// redis.SetLogger after New takes all lines back.

type redisLogKey struct{}

var installRedisLogger = sync.OnceFunc(func() {
	redis.SetLogger(&redisLogRouter{std: log.New(os.Stderr, "redis: ", log.LstdFlags)})
})

type redisLogRouter struct{ std *log.Logger }

func (r *redisLogRouter) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	if ctx != nil {
		if l, ok := ctx.Value(redisLogKey{}).(*slog.Logger); ok {
			l.Debug("hotcache: go-redis: " + msg)
			return
		}
	}
	if m := dialErrorID.FindStringSubmatch(msg); m != nil {
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if l, ok := redisLoggers.Load(id); ok {
			l.(*slog.Logger).Debug("hotcache: go-redis: " + msg)
			return
		}
	}
	r.std.Print(msg)
}

var (
	redisLoggers sync.Map // Client.logID -> *slog.Logger, while the Client is open
	redisLogIDs  atomic.Uint64
	dialErrorID  = regexp.MustCompile(`hotcache client (\d+): `)
)

// dialError marks an error of a connection dialed for one Client.
type dialError struct {
	id  uint64
	err error
}

func (e *dialError) Error() string { return fmt.Sprintf("hotcache client %d: %v", e.id, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// redisDialer returns the dialer of the Redis clients New builds: go-redis's
// default one (TCP keep-alive probes from 30 s idle, then TLS when
// WithRedisTLS gave a config), with errors marked. go-redis applies its
// TLSConfig only in its own dialer, so this one does the handshake itself.
func (c *Client) redisDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.o.opTimeout, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	id := c.logID
	tlsCfg := c.o.sec.redisTLS
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, &dialError{id: id, err: err}
		}
		if tlsCfg == nil {
			return conn, nil
		}
		cfg := tlsCfg
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if c.o.opTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.o.opTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, &dialError{id: id, err: err}
		}
		return tc, nil
	}
}

// redisCtx marks ctx as a context of this Client's Redis calls, so go-redis's
// log lines about them go to the Client's logger.
func (c *Client) redisCtx(ctx context.Context) context.Context {
	if ctx.Value(redisLogKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, redisLogKey{}, c.log)
}
