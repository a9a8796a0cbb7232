package proxy

import (
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// fakeCommandInfos is a part of Redis 7.0's COMMAND table, as go-redis
// parses it.
func fakeCommandInfos() map[string]*redis.CommandInfo {
	ci := func(name string, first, last, step int8, flags ...string) *redis.CommandInfo {
		return &redis.CommandInfo{Name: name, FirstKeyPos: first, LastKeyPos: last, StepCount: step, Flags: flags,
			ReadOnly: slices.Contains(flags, "readonly")}
	}
	m := map[string]*redis.CommandInfo{}
	for _, c := range []*redis.CommandInfo{
		ci("get", 1, 1, 1, "readonly", "fast"),
		ci("hgetall", 1, 1, 1, "readonly"),
		ci("ttl", 1, 1, 1, "readonly", "fast"),
		ci("set", 1, 1, 1, "write", "denyoom"),
		ci("mset", 1, -1, 2, "write", "denyoom"),
		ci("mget", 1, -1, 1, "readonly", "fast"),
		ci("blpop", 1, -2, 1, "write", "blocking"),
		ci("eval", 0, 0, 0, "noscript", "movablekeys"),
		ci("zunionstore", 1, 1, 1, "write", "movablekeys"),
		ci("sort", 1, 1, 1, "write", "movablekeys"),
		ci("select", 0, 0, 0, "loading", "stale", "fast"),
		ci("client", 0, 0, 0),
		ci("ssubscribe", 1, -1, 1, "pubsub"),
		ci("ping", 0, 0, 0, "fast"),
	} {
		m[c.Name] = c
	}
	return m
}

// TestClassify covers the command table, with Redis' COMMAND table and
// without it (before it is read): kind, key positions, read, write,
// cacheable and pipe mode.
func TestClassify(t *testing.T) {
	loaded := newCommandTable(fakeCommandInfos())
	type want struct {
		kind                                   cmdKind
		keys                                   string
		write, cacheable, pipe, barrier, state bool
		blocking, redis                        bool
	}
	for _, tc := range []struct {
		cmd       string
		loaded    want
		unloaded  want
		sameWhole bool // unloaded is loaded
	}{
		{cmd: "GET k", loaded: want{kind: kindGet, keys: "k", cacheable: true, redis: true}, unloaded: want{kind: kindGet}},
		{cmd: "get k", loaded: want{kind: kindGet, keys: "k", cacheable: true, redis: true}, unloaded: want{kind: kindGet}},
		{cmd: "HGETALL h", loaded: want{keys: "h", cacheable: true, redis: true}},
		{cmd: "TTL k", loaded: want{keys: "k", redis: true}},
		{cmd: "SET k v", loaded: want{keys: "k", write: true, redis: true}},
		{cmd: "MSET a 1 b 2", loaded: want{keys: "a b", write: true, redis: true}},
		{cmd: "MGET a b", loaded: want{kind: kindMGet, keys: "a b", redis: true}, unloaded: want{kind: kindMGet}},
		{cmd: "BLPOP a b 0", loaded: want{keys: "a b", write: true, blocking: true, redis: true}},
		{cmd: "EVAL s 2 a b x", loaded: want{keys: "a b", write: true, redis: true}, unloaded: want{keys: "a b", write: true}},
		{cmd: "ZUNIONSTORE d 2 a b", loaded: want{keys: "d a b", write: true, redis: true}, unloaded: want{keys: "a b"}},
		{cmd: "SELECT 1", loaded: want{kind: kindSelect, barrier: true, redis: true}, sameWhole: true},
		{cmd: "HELLO 3", loaded: want{kind: kindHello, barrier: true, state: true}, sameWhole: true},
		{cmd: "MULTI", loaded: want{kind: kindMulti, barrier: true}, sameWhole: true},
		{cmd: "exec", loaded: want{kind: kindExec, barrier: true}, sameWhole: true},
		{cmd: "DISCARD", loaded: want{kind: kindExec, barrier: true}, sameWhole: true},
		{cmd: "WATCH k", loaded: want{kind: kindWatch, barrier: true}, sameWhole: true},
		{cmd: "UNWATCH", loaded: want{kind: kindUnwatch, barrier: true}, sameWhole: true},
		{cmd: "RESET", loaded: want{kind: kindReset, barrier: true}, sameWhole: true},
		{cmd: "AUTH u p", loaded: want{kind: kindAuth, barrier: true, state: true}, sameWhole: true},
		{cmd: "SUBSCRIBE a b", loaded: want{pipe: true}, sameWhole: true},
		{cmd: "PSUBSCRIBE a*", loaded: want{pipe: true}, sameWhole: true},
		{cmd: "SSUBSCRIBE a", loaded: want{pipe: true, keys: "a", redis: true}, unloaded: want{pipe: true, keys: "a"}},
		{cmd: "MONITOR", loaded: want{pipe: true}, sameWhole: true},
		{cmd: "CLIENT REPLY OFF", loaded: want{pipe: true}, sameWhole: true},
		{cmd: "client tracking on", loaded: want{pipe: true}, sameWhole: true},
		{cmd: "CLIENT SETNAME app:x", loaded: want{kind: kindSetName, barrier: true, state: true}, sameWhole: true},
		{cmd: "CLIENT SETINFO lib-name x", loaded: want{kind: kindSetInfo, state: true}, sameWhole: true},
		{cmd: "CLIENT ID", loaded: want{redis: true}},
		{cmd: "READONLY", loaded: want{kind: kindReadonly, state: true}, sameWhole: true},
		{cmd: "CLUSTER SLOTS", loaded: want{kind: kindCluster}, sameWhole: true},
		{cmd: "QUIT", loaded: want{kind: kindQuit}, sameWhole: true},
		{cmd: "ASKING", loaded: want{kind: kindAsking}, sameWhole: true},
		{cmd: "HOTSPOT INFO", loaded: want{kind: kindHotspot}, sameWhole: true},
		{cmd: "PING", loaded: want{redis: true}},
		{cmd: "NOSUCHCOMMAND x", loaded: want{}},
	} {
		args := bytesArgs(strings.Fields(tc.cmd))
		for _, table := range []struct {
			name string
			t    *commandTable
			want want
		}{{"loaded", loaded, tc.loaded}, {"unloaded", nil, tc.unloaded}} {
			if table.t == nil && tc.sameWhole {
				table.want = tc.loaded
				table.want.redis = false
			}
			in := table.t.classify(args)
			got := want{kind: in.kind, keys: string(joinArgs(in.keys(nil, args))), write: in.write, cacheable: in.cacheable,
				pipe: in.pipe, barrier: in.barrier, state: in.state, blocking: in.blocking, redis: in.redis}
			if got != table.want {
				t.Errorf("%s, %s table: got %+v, want %+v", tc.cmd, table.name, got, table.want)
			}
		}
	}
}

func bytesArgs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func joinArgs(bs [][]byte) []byte {
	var out []byte
	for i, b := range bs {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, b...)
	}
	return out
}
