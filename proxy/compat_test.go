package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// The compatibility tests send the same commands to Redis directly and
// through the proxy, each on a raw connection, and compare the replies byte
// for byte. A step's key names carry {p}, a prefix of the test's own; both
// runs use the same prefix, one after the other, each starting from no key.

type step struct {
	args []string
	// approx: the reply is an integer that may differ by this much between
	// the runs (a TTL read a second later); 0: byte for byte.
	approx int64
}

func s(args ...string) step { return step{args: args} }

// runBoth runs fn on a direct connection and on a proxied one and compares
// what fn collected, reply by reply.
func runBoth(t *testing.T, redisAddr, proxyAddr, prefix string, fn func(c *rawConn, p string) [][]byte) {
	t.Helper()
	clean := func() {
		c := newRedis(redisAddr)
		defer c.Close()
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		for _, k := range keys {
			c.Del(context.Background(), k)
		}
	}
	clean()
	d := dialRaw(t, redisAddr)
	direct := fn(d, prefix)
	d.close()
	clean()
	pc := dialRaw(t, proxyAddr)
	proxied := fn(pc, prefix)
	pc.close()
	clean()
	if len(direct) != len(proxied) {
		t.Fatalf("%d replies direct, %d through the proxy", len(direct), len(proxied))
	}
	for i := range direct {
		if !bytes.Equal(direct[i], proxied[i]) {
			t.Errorf("reply %d differs:\ndirect: %q\nproxy:  %q", i, clip(direct[i]), clip(proxied[i]))
		}
	}
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}

// steps runs a list of steps; approximate integers are compared as such and
// replaced by a marker.
func steps(t *testing.T, list []step) func(c *rawConn, p string) [][]byte {
	return func(c *rawConn, p string) [][]byte {
		var out [][]byte
		for _, st := range list {
			args := make([]string, len(st.args))
			for i, a := range st.args {
				args[i] = strings.ReplaceAll(a, "{p}", p)
			}
			r := c.do(args...)
			if strings.EqualFold(args[0], "hello") {
				r = redactHello(r)
			}
			if st.approx > 0 {
				r = approxInt(t, r, st.approx)
			}
			out = append(out, r)
		}
		return out
	}
}

// approxInt keeps an integer reply's bucket so that two readings up to d
// apart compare equal; it checks the reply is an integer.
func approxInt(t *testing.T, r []byte, d int64) []byte {
	if len(r) < 4 || r[0] != ':' {
		t.Fatalf("want an integer reply, got %q", r)
	}
	n, err := strconv.ParseInt(string(r[1:len(r)-2]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		return r
	}
	return fmt.Appendf(nil, ":~%d\r\n", (n+d/2)/(d*10)) // within d of each other: same coarse bucket unless on an edge
}

func TestCompatDataTypes(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		prefix := stacktest.Name(t) + ":"
		cleanKeys(t, redisAddr, prefix)
		big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
		bin := "{p}bin\x00\r\n\xff\xfe key"
		runBoth(t, redisAddr, tp.addr, prefix, steps(t, []step{
			// strings
			s("SET", "{p}s", "hello"), s("GET", "{p}s"), s("APPEND", "{p}s", " world"), s("GETRANGE", "{p}s", "0", "4"),
			s("STRLEN", "{p}s"), s("INCR", "{p}n"), s("INCRBY", "{p}n", "41"), s("INCRBYFLOAT", "{p}f", "1.5"),
			s("MSET", "{p}a", "1", "{p}b", "2"), s("MGET", "{p}a", "{p}b", "{p}missing"), s("SETNX", "{p}a", "x"),
			s("GETSET", "{p}a", "3"), s("GETDEL", "{p}a"), s("GET", "{p}a"), s("SET", "{p}s2", "v", "NX", "GET"),
			// hashes
			s("HSET", "{p}h", "f1", "v1", "f2", "v2"), s("HGET", "{p}h", "f1"), s("HGETALL", "{p}h"), s("HMGET", "{p}h", "f1", "nope"),
			s("HINCRBY", "{p}h", "n", "5"), s("HKEYS", "{p}h"), s("HVALS", "{p}h"), s("HLEN", "{p}h"), s("HEXISTS", "{p}h", "f2"),
			s("HDEL", "{p}h", "f2"),
			// lists
			s("RPUSH", "{p}l", "a", "b", "c"), s("LPUSH", "{p}l", "z"), s("LRANGE", "{p}l", "0", "-1"), s("LPOP", "{p}l"),
			s("RPOP", "{p}l", "2"), s("LLEN", "{p}l"), s("LINDEX", "{p}l", "0"), s("LPOS", "{p}l", "a"),
			// sets
			s("SADD", "{p}set", "x", "y", "z"), s("SISMEMBER", "{p}set", "y"), s("SCARD", "{p}set"), s("SREM", "{p}set", "z"),
			s("SINTERCARD", "1", "{p}set"), s("SMISMEMBER", "{p}set", "x", "q"),
			// sorted sets
			s("ZADD", "{p}z", "1", "one", "2.5", "two", "3", "three"), s("ZRANGE", "{p}z", "0", "-1", "WITHSCORES"),
			s("ZSCORE", "{p}z", "two"), s("ZRANK", "{p}z", "three"), s("ZINCRBY", "{p}z", "0.25", "one"),
			s("ZRANGEBYSCORE", "{p}z", "(1", "+inf"), s("ZREVRANGE", "{p}z", "0", "1"), s("ZCARD", "{p}z"),
			s("ZUNIONSTORE", "{p}zu", "2", "{p}z", "{p}z"), s("ZRANGE", "{p}zu", "0", "-1", "WITHSCORES"),
			// expiry (TTLs compared within a second: the runs are not at the same instant)
			s("SET", "{p}e", "v", "EX", "100"), {args: []string{"TTL", "{p}e"}, approx: 1},
			{args: []string{"PTTL", "{p}e"}, approx: 1000}, s("PERSIST", "{p}e"), s("TTL", "{p}e"), s("EXPIRE", "{p}e", "50"),
			s("SET", "{p}px", "v", "PX", "60000"), s("EXISTS", "{p}e", "{p}px"), // 50 ms expired before EXISTS on a busy machine
			// a big value and binary keys
			s("SET", "{p}big", big), s("GET", "{p}big"), s("STRLEN", "{p}big"),
			s("SET", bin, "\x00\x01\x02\r\n"), s("GET", bin), s("DEL", bin, "{p}big"),
			// errors
			s("GET", "{p}h"), s("LPUSH", "{p}s", "x"), s("NOSUCHCOMMAND", "{p}x", "y"), s("GET"), s("INCR", "{p}s"),
			s("SELECT", "99"), s("HOTSPOTX"),
			// types and scans
			s("TYPE", "{p}z"), s("SCAN", "0", "MATCH", "{p}nomatch*", "COUNT", "1000"), s("DEL", "{p}s", "{p}n", "{p}nope"),
		}))
	})
}

func TestCompatSessionState(t *testing.T) {
	eachUpstream(t, func(t *testing.T, mode func(*Config)) {
		redisAddr := stacktest.Redis(t)
		tp := startProxy(t, redisAddr, mode)
		prefix := stacktest.Name(t) + ":"
		cleanKeys(t, redisAddr, prefix)

		t.Run("select", func(t *testing.T) {
			runBoth(t, redisAddr, tp.addr, prefix, steps(t, []step{
				s("SELECT", "1"), s("SET", "{p}db1", "one"), s("GET", "{p}db1"), s("SELECT", "0"), s("GET", "{p}db1"),
				s("SELECT", "1"), s("DEL", "{p}db1"), s("SELECT", "0"),
			}))
		})
		t.Run("resp3", func(t *testing.T) {
			runBoth(t, redisAddr, tp.addr, prefix, func(c *rawConn, p string) [][]byte {
				hello := c.do("HELLO", "3")
				out := [][]byte{redactHello(hello)}
				return append(out, steps(t, []step{
					s("HSET", "{p}h3", "a", "1", "b", "2"), s("HGETALL", "{p}h3"), s("SADD", "{p}s3", "x"), s("SMEMBERS", "{p}s3"),
					s("ZADD", "{p}z3", "1.5", "m"), s("ZSCORE", "{p}z3", "m"), s("ZRANGE", "{p}z3", "0", "-1", "WITHSCORES"),
					s("GET", "{p}none"), s("MGET", "{p}none", "{p}h3"), s("CONFIG", "GET", "maxmemory-policy"),
					s("HELLO", "2"), s("HGETALL", "{p}h3"),
				})(c, p)...)
			})
		})
		t.Run("multi-watch", func(t *testing.T) {
			runBoth(t, redisAddr, tp.addr, prefix, func(c *rawConn, p string) [][]byte {
				other := newRedis(redisAddr)
				defer other.Close()
				var out [][]byte
				out = append(out, c.do("SET", p+"w", "0"), c.do("WATCH", p+"w"))
				other.Set(context.Background(), p+"w", "changed", 0) // the conflict
				out = append(out, c.do("MULTI"), c.do("SET", p+"w", "mine"), c.do("INCR", p+"cnt"), c.do("EXEC"), c.do("GET", p+"w"))
				// Without a conflict, and with a command error inside.
				out = append(out, c.do("MULTI"), c.do("SET", p+"w", "mine"), c.do("LPUSH", p+"w", "x"), c.do("GET", p+"w"), c.do("EXEC"))
				out = append(out, c.do("MULTI"), c.do("NOSUCH"), c.do("EXEC"), c.do("DISCARD"))
				return out
			})
		})
		t.Run("pipeline", func(t *testing.T) {
			runBoth(t, redisAddr, tp.addr, prefix, func(c *rawConn, p string) [][]byte {
				var batch []byte
				for i := range 100 {
					switch i % 4 {
					case 0:
						batch = append(batch, encode("SET", p+"pl"+strconv.Itoa(i), strconv.Itoa(i))...)
					case 1:
						batch = append(batch, encode("GET", p+"pl"+strconv.Itoa(i-1))...)
					case 2:
						batch = append(batch, encode("INCR", p+"plc")...)
					case 3:
						batch = append(batch, encode("LPUSH", p+"pl0", "x")...) // WRONGTYPE
					}
				}
				if _, err := c.c.Write(batch); err != nil {
					t.Fatal(err)
				}
				var out [][]byte
				for range 100 {
					out = append(out, c.read())
				}
				return out
			})
		})
		t.Run("acl-user", func(t *testing.T) {
			admin := newRedis(redisAddr)
			defer admin.Close()
			user := "proxytest-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
			ctx := context.Background()
			if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw-"+user, "~"+prefix+"*", "+@all", "-flushall").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
			runBoth(t, redisAddr, tp.addr, prefix, steps(t, []step{
				s("AUTH", user, "wrong"), s("AUTH", user, "pw-"+user), s("SET", "{p}acl", "1"), s("GET", "{p}acl"),
				s("GET", "elsewhere:key"), s("ACL", "WHOAMI"), s("FLUSHALL"), s("HELLO", "2", "AUTH", "default", "nopass-wrong"),
			}))
		})
		compatBlockingAndPubSub(t, redisAddr, tp.addr, prefix)
	})
}

// compatBlockingAndPubSub: BLPOP served by a push and timing out, and
// SUBSCRIBE with a message, PING and UNSUBSCRIBE in RESP2 and RESP3, direct
// and through the proxy.
func compatBlockingAndPubSub(t *testing.T, redisAddr, proxyAddr, prefix string) {
	t.Run("blpop", func(t *testing.T) {
		runBoth(t, redisAddr, proxyAddr, prefix, func(c *rawConn, p string) [][]byte {
			c.send("BLPOP", p+"q", "5")
			time.Sleep(200 * time.Millisecond)
			pusher := newRedis(redisAddr)
			defer pusher.Close()
			pusher.RPush(context.Background(), p+"q", "job")
			out := [][]byte{c.read()}
			out = append(out, c.do("BLPOP", p+"q", "0.1")) // times out: a null
			return out
		})
	})
	t.Run("subscribe", func(t *testing.T) {
		for _, proto := range []string{"2", "3"} {
			runBoth(t, redisAddr, proxyAddr, prefix, func(c *rawConn, p string) [][]byte {
				var out [][]byte
				if proto == "3" {
					out = append(out, redactHello(c.do("HELLO", "3")))
				}
				c.send("SUBSCRIBE", p+"ch1", p+"ch2")
				out = append(out, c.read(), c.read())
				pub := newRedis(redisAddr)
				defer pub.Close()
				pub.Publish(context.Background(), p+"ch2", "hello")
				out = append(out, c.read())
				out = append(out, c.do("PING"), c.do("UNSUBSCRIBE", p+"ch1"))
				if proto == "3" { // RESP3 may run commands while subscribed
					out = append(out, c.do("SET", p+"sub3", "1"))
				}
				return out
			})
		}
	})
}

// redactHello drops the connection id from a HELLO reply: it differs from
// one connection to the next.
func redactHello(b []byte) []byte {
	i := bytes.Index(b, []byte("id\r\n:"))
	if i < 0 {
		return b
	}
	j := bytes.Index(b[i+5:], []byte("\r\n"))
	return append(append(append([]byte(nil), b[:i+5]...), 'X'), b[i+5+j:]...)
}
