package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestBlockedStreamReadKeyGone: a client blocked in XREADGROUP or XREAD
// whose stream is deleted and made another type gets Redis' own answer
// through the proxy too.
func TestBlockedStreamReadKeyGone(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	tp := startProxy(t, redisAddr, nil)
	prefix := stacktest.Name(t) + ":"
	cleanKeys(t, redisAddr, prefix)
	other := newRedis(redisAddr)
	defer other.Close()
	ctx := context.Background()
	for _, group := range []bool{true, false} {
		runBoth(t, redisAddr, tp.addr, prefix, func(c *rawConn, p string) [][]byte {
			key := p + "xs"
			other.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"f", "v"}})
			if group {
				other.XGroupCreate(ctx, key, "g", "$")
				c.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">")
			} else {
				c.send("XREAD", "BLOCK", "2000", "STREAMS", key, "$")
			}
			time.Sleep(200 * time.Millisecond)
			other.Del(ctx, key)
			other.Set(ctx, key, "1", 0)
			r := c.read()
			other.Del(ctx, key)
			return [][]byte{r}
		})
	}
}
