package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotcache/httpsource"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/envflag"
)

const warmHelp = `
Warms an app's Redis before traffic is opened: for each key that is missing
from Redis it reads the value from the app's source of truth over HTTP and
writes it to Redis with the app's TTL, at most --rate reads a second, in
batches (hotcache's Warm). The keys come from --keys FILE (one per line; #
starts a comment), from --top N: the app's N busiest keys now, from any
hotspotd's /v1/top (at most 1000), or from --hot-since D: every key the app
had hot in the last D (24h: the last day), from the history any hotspotd
keeps (/v1/history), busiest first.

--source is a URL template: {key} is replaced by the key, {id} by the part of
the key after its first ':' (both escaped for a path). A 200 answer's body is
the value, a 404 means the key does not exist, anything else is a failure.

Examples:
  hotspot warm --app shop --keys keys.txt --rate 500 \
      --source 'http://db-api:8080/items/{key}' --redis 127.0.0.1:16379
  hotspot warm --app shop --top 1000 --hotspotd 127.0.0.1:7070 --rate 2000 \
      --source 'http://127.0.0.1:8080/item/{id}' --redis-prefix shop:
  hotspot warm --app shop --hot-since 24h --rate 2000 \
      --source 'http://127.0.0.1:8080/item/{id}' --redis-prefix shop:
`

func runWarm(ctx context.Context, args []string) error {
	return warm(ctx, args, os.Getenv, os.Stdout)
}

func warm(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := newFlags("warm", warmHelp)
	app := fs.String("app", "", "the app whose Redis to warm (required)")
	keysFile := fs.String("keys", "", "file of keys to warm, one per line")
	top := fs.Int("top", 0, "warm the app's N busiest keys from hotspotd (1 to 1000)")
	hotSince := fs.Duration("hot-since", 0, "warm every key the app had hot in this long back, from hotspotd's history (e.g. 24h)")
	addr := hotspotdFlag(fs, "host:port of any hotspotd, for --top and --hot-since")
	rate := fs.Float64("rate", 500, "source reads per second at most")
	source := fs.String("source", "", "URL template of the source of truth, with {key} or {id} (required)")
	redisAddrs := fs.String("redis", "127.0.0.1:16379", "the app's Redis servers, comma-separated (several: sharded by Hotspot's ring, as the app does)")
	redisPrefix := fs.String("redis-prefix", "", "the app's Redis key prefix")
	ttl := fs.Duration("ttl", 10*time.Minute, "TTL of the values written (plus up to 10% jitter)")
	redisUser := fs.String("redis-user", "", "the app's Redis ACL user (password from HOTSPOT_REDIS_PASSWORD; docs/security.md)")
	redisCA := fs.String("redis-tls-ca", "", "PEM CA bundle: talk TLS to Redis, verifying it with this CA")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	switch {
	case *app == "":
		return usagef("--app is required")
	case *source == "" || !strings.Contains(*source, "{key}") && !strings.Contains(*source, "{id}"):
		return usagef("--source: a URL template with {key} or {id} is required")
	case countSet(*keysFile != "", *top != 0, *hotSince != 0) != 1:
		return usagef("give exactly one of --keys FILE, --top N and --hot-since D")
	case *hotSince < 0:
		return usagef("--hot-since %v: want > 0", *hotSince)
	case *top < 0 || *top > 1000:
		return usagef("--top %d: want 1 to 1000", *top)
	case !(*rate > 0):
		return usagef("--rate %v: want > 0", *rate)
	case *ttl <= 0:
		return usagef("--ttl %v: want > 0", *ttl)
	}
	addrs := envflag.SplitList(*redisAddrs)
	if len(addrs) == 0 {
		return usagef("--redis: at least one server")
	}

	var keys []string
	var err error
	switch {
	case *keysFile != "":
		keys, err = readKeys(*keysFile)
	case *top != 0:
		keys, err = hotcache.TopKeys(ctx, *addr, *app, *top)
	default:
		keys, err = hotSinceKeys(ctx, *addr, *app, time.Now().Add(-*hotSince))
	}
	if err != nil {
		return err
	}
	opts := []hotcache.Option{hotcache.WithRedisAuth(*redisUser, getenv("HOTSPOT_REDIS_PASSWORD"))}
	if *redisCA != "" {
		tc, err := caTLS(*redisCA)
		if err != nil {
			return usagef("--redis-tls-ca: %v", err)
		}
		opts = append(opts, hotcache.WithRedisTLS(tc))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := hotcache.New(ctx, append(opts, hotcache.WithApp(*app), hotcache.WithRedis(addrs...),
		hotcache.WithRedisKeyPrefix(*redisPrefix), hotcache.WithRedisTTL(*ttl), hotcache.WithLogger(log),
		hotcache.WithTimeout(2*time.Second), // a source behind HTTP is slower than Redis
		hotcache.WithLoader(&httpsource.Loader{Template: *source}),
		hotcache.WithLoaderLimit(hotcache.Rate(*rate)), hotcache.WithWarmLimit(hotcache.NoLimit))...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "warming %d keys of %s at %.0f/s at most\n", len(keys), *app, *rate)
	start := time.Now()
	st, err := c.Warm(ctx, keys)
	fmt.Fprintf(out, "%d already in Redis, %d loaded, %d not found, %d failed, in %v\n",
		st.Present, st.Loaded, st.NotFound, st.Failed, time.Since(start).Round(time.Millisecond))
	if err != nil {
		return err
	}
	if st.Failed > 0 {
		return fmt.Errorf("%d keys could not be read from the source", st.Failed)
	}
	return c.Close()
}

// readKeys reads one key a line; blank lines and lines starting with # are skipped.
func readKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--keys: %v", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k := strings.TrimSpace(sc.Text())
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--keys %s: %w", path, err)
	}
	return keys, nil
}

// countSet is how many of the flags given are true.
func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// hotSinceKeys asks hotspotd at addr for the keys app promoted since since,
// from its history, busiest (highest promotion rate) first.
func hotSinceKeys(ctx context.Context, addr, app string, since time.Time) ([]string, error) {
	c, err := apiClient(addr, "")
	if err != nil {
		return nil, err
	}
	res, err := c.History(ctx, hotspotapi.HistoryQuery{App: app, Since: since, Limit: hotspotapi.MaxHistoryLimit})
	if err != nil {
		return nil, apiError(err)
	}
	rate := map[string]float64{}
	for _, e := range res.Events {
		if e.Kind == "promoted" && e.Rate >= rate[e.Key] {
			rate[e.Key] = e.Rate
		}
	}
	keys := slices.Collect(maps.Keys(rate))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(rate[b], rate[a]), strings.Compare(a, b)) })
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: app %s has no key promoted since %s in its history", addr, app, since.Format(time.RFC3339))
	}
	return keys, nil
}
