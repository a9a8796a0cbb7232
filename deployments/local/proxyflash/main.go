// Command proxyflash measures how soon hotspot-proxy answers a flash key
// from memory, for deployments/local/proxy-bench.sh: it GETs one key through
// the proxy from several connections, one command at a time each, and
// prints when the 1,000th GET went out (all of them within the first
// second, so when the key's rate crossed 1,000/s, hotspotd's default
// threshold) and when the proxy first answered the key from L1 (its
// HOTSPOT INFO hits, read every 2 ms).
//
//	proxyflash [-addr 127.0.0.1:26390] [-c 4] KEY
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:26390", "the proxy")
	conns := flag.Int("c", 4, "connections sending GETs")
	threshold := flag.Int64("threshold", 1000, "hotspotd's threshold, accesses per second")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: proxyflash [-addr A] [-c N] KEY")
		os.Exit(2)
	}
	key := flag.Arg(0)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: *addr})
	h0, err := hits(ctx, admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxyflash:", err)
		os.Exit(1)
	}
	var sent, crossed atomic.Int64
	start := time.Now()
	for range *conns {
		c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1})
		go func() {
			for {
				c.Get(ctx, key)
				if sent.Add(1) == *threshold {
					crossed.Store(int64(time.Since(start)))
				}
			}
		}()
	}
	for time.Since(start) < 10*time.Second {
		time.Sleep(2 * time.Millisecond)
		if h, err := hits(ctx, admin); err == nil && h > h0 {
			l1, cr := time.Since(start), time.Duration(crossed.Load())
			fmt.Printf("crossed %d/s %v after its first GET; served from L1 %v after it: %v after the crossing (%d GETs sent)\n",
				*threshold, cr.Round(time.Millisecond), l1.Round(time.Millisecond), (l1 - cr).Round(time.Millisecond), sent.Load())
			return
		}
	}
	fmt.Println("not served from L1 within 10 s")
	os.Exit(1)
}

// hits reads the proxy's count of answers from L1.
func hits(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.Do(ctx, "hotspot", "info").Text()
	if err != nil {
		return 0, fmt.Errorf("HOTSPOT INFO: %w", err)
	}
	for l := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "hits:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("HOTSPOT INFO has no hits: %q", s)
}
