// Command proxylat measures the latency of a Redis server, or of
// hotspot-proxy in front of one, at a fixed request rate, for
// deployments/local/proxy-bench.sh (redis-benchmark cannot hold a rate).
//
// Each connection sends its share of the rate on a fixed schedule, one
// command at a time, GETs or SETs of random keys. It prints two latencies
// per command: from when it went out to its reply (the server's), and from
// when it was due (which adds the sender's own lateness, a timer that fired
// late on a busy machine, and shows a server that falls behind in full: no
// coordinated omission).
//
//	proxylat [-addr 127.0.0.1:26390] [-rate 10000] [-c 50] [-d 10s] [-r 100000] [-cmd get|set]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:26390", "the server: Redis, or the proxy")
	rate := flag.Float64("rate", 10000, "commands per second, all connections together")
	conns := flag.Int("c", 50, "connections")
	d := flag.Duration("d", 10*time.Second, "how long to send")
	keys := flag.Int("r", 100000, "random keys among r, named as redis-benchmark -r names them (key:000000000042)")
	cmd := flag.String("cmd", "get", "get or set")
	flag.Parse()
	if *rate <= 0 || *conns < 1 || *d <= 0 || *keys < 1 || *cmd != "get" && *cmd != "set" {
		fmt.Fprintln(os.Stderr, "usage: proxylat [-addr A] [-rate R>0] [-c N>=1] [-d D>0] [-r K>=1] [-cmd get|set]")
		os.Exit(2)
	}
	svc, due, late, err := run(*addr, *rate, *conns, *d, *keys, *cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxylat:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s at %.0f/s over %d connections for %v: %d commands\n", *addr, *cmd, *rate, *conns, *d, len(svc))
	fmt.Printf("  sent to reply, ms:  %s\n", quantiles(svc))
	fmt.Printf("  due to reply, ms:   %s; %d went out over 1 ms late\n", quantiles(due), late)
}

func quantiles(lat []time.Duration) string {
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / 1e6 }
	return fmt.Sprintf("p50 %.3f p99 %.3f p99.9 %.3f max %.3f", q(0.50), q(0.99), q(0.999), q(1))
}

// run sends the commands and returns each one's latency from when it went
// out and from when it was due, and how many went out more than 1 ms late.
func run(addr string, rate float64, conns int, d time.Duration, keys int, cmd string) (svc, due []time.Duration, late int, err error) {
	ctx := context.Background()
	clients := make([]*redis.Client, conns)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
		if err := clients[i].Ping(ctx).Err(); err != nil {
			return nil, nil, 0, err
		}
	}
	every := time.Duration(float64(conns) / rate * float64(time.Second))
	start := time.Now().Add(100 * time.Millisecond)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			defer c.Close()
			var cs, cd []time.Duration
			n := 0
			var cerr error
			for at := start.Add(every * time.Duration(i) / time.Duration(conns)); at.Sub(start) < d; at = at.Add(every) {
				time.Sleep(time.Until(at))
				sent := time.Now()
				if sent.Sub(at) > time.Millisecond {
					n++
				}
				key := fmt.Sprintf("key:%012d", rand.IntN(keys)) // redis-benchmark's -r names
				if cmd == "get" {
					cerr = c.Get(ctx, key).Err()
					if cerr == redis.Nil {
						cerr = nil
					}
				} else {
					cerr = c.Set(ctx, key, "xxx", 0).Err()
				}
				if cerr != nil {
					break
				}
				cs, cd = append(cs, time.Since(sent)), append(cd, time.Since(at))
			}
			mu.Lock()
			defer mu.Unlock()
			svc, due, late = append(svc, cs...), append(due, cd...), late+n
			if cerr != nil && err == nil {
				err = cerr
			}
		})
	}
	wg.Wait()
	if err == nil && len(svc) == 0 {
		err = fmt.Errorf("no command was sent")
	}
	return svc, due, late, err
}
