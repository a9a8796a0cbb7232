package proxy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// Clients nobody here wrote, through the proxy.

// need finds a tool, or skips (fails under CI=true).
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (Debian: redis-tools)", tool)
		}
		t.Skipf("%s not installed (Debian: redis-tools)", tool)
	}
	return p
}

func hostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

func TestClientRedisCLI(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		cli := need(t, "redis-cli")
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		prefix := stacktest.Name(t) + ":"
		cleanKeys(t, redisAddr, prefix)
		host, port := hostPort(tp.addr)
		rhost, rport := hostPort(redisAddr)
		cliOut := func(h, p string, args ...string) string {
			out, err := exec.Command(cli, append([]string{"-h", h, "-p", p}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		// The same commands direct and through the proxy (each on keys of its
		// own, which no output names): the same output.
		for _, args := range [][]string{
			{"SET", "{p}k", "hello world"}, {"GET", "{p}k"}, {"-3", "HSET", "{p}h", "a", "1"},
			{"-3", "HGETALL", "{p}h"}, {"HGETALL", "{p}h"}, {"-3", "ZADD", "{p}z", "1.5", "m"},
			{"-3", "ZRANGE", "{p}z", "0", "-1", "WITHSCORES"}, {"LPUSH", "{p}k", "x"}, {"--no-raw", "GET", "{p}nope"},
			{"DEL", "{p}k", "{p}h", "{p}z"},
		} {
			with := func(p string) []string {
				out := make([]string, len(args))
				for i, a := range args {
					out[i] = strings.ReplaceAll(a, "{p}", prefix+p)
				}
				return out
			}
			direct := cliOut(rhost, rport, with("d:")...)
			proxied := cliOut(host, port, with("p:")...)
			if direct != proxied {
				t.Errorf("redis-cli %v: direct %q, through the proxy %q", args, direct, proxied)
			}
		}
		if got := cliOut(host, port, "HOTSPOT", "INFO"); !strings.Contains(got, "hit_ratio:") {
			t.Fatalf("HOTSPOT INFO: %q", got)
		}
		// --pipe: redis-cli's mass insertion, ended by its ECHO marker.
		var in strings.Builder
		for i := range 1000 {
			in.Write(encode("SET", prefix+"pipe:"+string(rune('a'+i%26))+strings.Repeat("x", i%7), "v"))
		}
		cmd := exec.Command(cli, "-h", host, "-p", port, "--pipe")
		cmd.Stdin = strings.NewReader(in.String())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "errors: 0, replies: 1000") {
			t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
		}
	})
}

func TestClientRedisBenchmark(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		bench := need(t, "redis-benchmark")
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		host, port := hostPort(tp.addr)
		for _, pipeline := range []string{"1", "16"} {
			out, err := exec.Command(bench, "-h", host, "-p", port, "-n", "5000", "-c", "20", "-P", pipeline, "-r", "1000",
				"-t", "set,get,incr,lpush,rpop,sadd,hset,zadd,mset", "-q", "--csv").CombinedOutput()
			if err != nil {
				t.Fatalf("redis-benchmark -P %s: %v\n%s", pipeline, err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 9 || strings.Contains(string(out), "rror") {
				t.Fatalf("redis-benchmark -P %s:\n%s", pipeline, out)
			}
			t.Logf("redis-benchmark -P %s through the proxy (a busy machine, not a figure):\n%s", pipeline, out)
		}
		c := newRedis(redisAddr)
		defer c.Close()
		c.Del(context.Background(), "key:__rand_int__", "counter:__rand_int__", "mylist", "myset", "myhash", "myzset")
	})
}

func TestClientGoRedis(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		prefix := stacktest.Name(t) + ":"
		cleanKeys(t, redisAddr, prefix)
		ctx := context.Background()
		for _, proto := range []int{2, 3} {
			c := redis.NewClient(&redis.Options{Addr: tp.addr, Protocol: proto})
			p := prefix + string(rune('0'+proto)) + ":"
			if err := c.Set(ctx, p+"k", "v", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, p+"k").Result(); err != nil || v != "v" {
				t.Fatalf("RESP%d GET: %q %v", proto, v, err)
			}
			if _, err := c.Get(ctx, p+"missing").Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("RESP%d GET missing: %v", proto, err)
			}
			c.HSet(ctx, p+"h", "a", "1", "b", "2")
			if m, err := c.HGetAll(ctx, p+"h").Result(); err != nil || m["a"] != "1" || len(m) != 2 {
				t.Fatalf("RESP%d HGETALL: %v %v", proto, m, err)
			}
			cmds, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				for range 100 {
					pipe.Incr(ctx, p+"n")
				}
				return nil
			})
			if err != nil || cmds[99].(*redis.IntCmd).Val() != 100 {
				t.Fatalf("RESP%d MULTI/EXEC pipeline: %v", proto, err)
			}
			err = c.Watch(ctx, func(tx *redis.Tx) error {
				newRedis(redisAddr).Set(ctx, p+"w", "other", 0)
				_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error { return pipe.Set(ctx, p+"w", "mine", 0).Err() })
				return err
			}, p+"w")
			if !errors.Is(err, redis.TxFailedErr) {
				t.Fatalf("RESP%d WATCH conflict: %v", proto, err)
			}
			sub := c.Subscribe(ctx, p+"ch")
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			newRedis(redisAddr).Publish(ctx, p+"ch", "hi")
			msg, err := sub.ReceiveMessage(ctx)
			if err != nil || msg.Payload != "hi" {
				t.Fatalf("RESP%d pub/sub: %v %v", proto, msg, err)
			}
			sub.Close()
			if err := c.LPush(ctx, p+"k", "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
				t.Fatalf("RESP%d WRONGTYPE: %v", proto, err)
			}
			c.Close()
		}
	})
}

func TestClientRedisPy(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		prefix := stacktest.Name(t)
		cleanKeys(t, redisAddr, prefix)
		root, _ := filepath.Abs("..")
		setup := exec.Command(filepath.Join(root, "deployments/local/pyenv.sh"))
		setup.Stderr = testWriter{t}
		out, err := setup.Output()
		if err != nil {
			msg := "redis-py venv (deployments/local/pyenv.sh): " + err.Error()
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		python := strings.TrimSpace(string(out))
		host, port := hostPort(tp.addr)
		res, err := exec.Command(python, "testdata/compat.py", host, port, prefix).CombinedOutput()
		if err != nil || strings.TrimSpace(string(res)) != "ok" {
			t.Fatalf("redis-py through the proxy: %v\n%s", err, res)
		}
	})
}
