package hotcache

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger (redis.SetLogger), by
// default to stderr: during an outage every failed dial prints a line. Its
// calls pass the context of the command that failed, so New installs, once
// per process, a logger that sends a line to the logger of the Client whose
// context it carries (WithLogger; nil discards it) and any other line to
// stderr as go-redis's default does. Every Redis call the Client makes runs
// in a context made by redisCtx. An app that calls redis.SetLogger after New
// takes all lines back.

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
	r.std.Print(msg)
}

// redisCtx marks ctx as a context of this Client's Redis calls, so go-redis's
// log lines about them go to the Client's logger.
func (c *Client) redisCtx(ctx context.Context) context.Context {
	if ctx.Value(redisLogKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, redisLogKey{}, c.log)
}
