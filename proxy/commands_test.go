package proxy

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// realCommandTable is the table of a real Redis 7.0
// (testdata/command-redis-7.0.resp), read from a fake Redis that replays it.
func realCommandTable(t *testing.T) *commandTable {
	t.Helper()
	rs := newFakeRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.addr(), Protocol: 2})
	defer rdb.Close()
	tb, err := loadCommands(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestClassify covers the command table, with Redis' COMMAND table and
// without it (before it is read): kind, key positions, read, write,
// cacheable and pipe mode.
func TestClassify(t *testing.T) {
	loaded := realCommandTable(t)
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
		{cmd: "ZUNIONSTORE d 2 a b", loaded: want{keys: "d a b", write: true, redis: true}, unloaded: want{keys: "a b"}},
		{cmd: "SELECT 1", loaded: want{kind: kindSelect, barrier: true, redis: true}, sameWhole: true},
		{cmd: "HELLO 3", loaded: want{kind: kindHello, barrier: true, state: true}, sameWhole: true},
		{cmd: "MULTI", loaded: want{kind: kindMulti, barrier: true}, sameWhole: true},
		{cmd: "exec", loaded: want{kind: kindExec, barrier: true}, sameWhole: true},
		{cmd: "DISCARD", loaded: want{kind: kindExec, barrier: true}, sameWhole: true},
		{cmd: "WATCH k", loaded: want{kind: kindWatch, keys: "k", barrier: true, redis: true}, unloaded: want{kind: kindWatch, barrier: true}},
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
		{cmd: "CLIENT SETINFO lib-name x", loaded: want{kind: kindSetInfo, state: true}, unloaded: want{kind: kindSetInfo, state: true}}, // Redis 7.2's
		{cmd: "CLIENT ID", loaded: want{redis: true}},
		{cmd: "READONLY", loaded: want{kind: kindReadonly, state: true}, sameWhole: true},
		{cmd: "CLUSTER SLOTS", loaded: want{kind: kindCluster}, sameWhole: true},
		{cmd: "QUIT", loaded: want{kind: kindQuit}, sameWhole: true},
		{cmd: "ASKING", loaded: want{kind: kindAsking}, sameWhole: true},
		{cmd: "HOTSPOT INFO", loaded: want{kind: kindHotspot}, unloaded: want{kind: kindHotspot}},
		{cmd: "PING", loaded: want{redis: true}},
		{cmd: "UNSUBSCRIBE a b", loaded: want{kind: kindUnsubscribe}, sameWhole: true},
		{cmd: "punsubscribe", loaded: want{kind: kindUnsubscribe}, sameWhole: true},
		{cmd: "SUNSUBSCRIBE a b", loaded: want{kind: kindUnsubscribe, keys: "a b", redis: true}, unloaded: want{kind: kindUnsubscribe, keys: "a b"}},
		{cmd: "CLUSTER NODES", loaded: want{kind: kindCluster}, sameWhole: true},
		{cmd: "OBJECT ENCODING k", loaded: want{keys: "k", redis: true}},
		{cmd: "MIGRATE h 1 k 0 10", loaded: want{keys: "k", write: true, redis: true}},
		{cmd: "MIGRATE h 1 \"\" 0 10 COPY AUTH2 KEYS pw AUTH KEYS KEYS a b", loaded: want{keys: "a b", write: true, redis: true}},
		{cmd: "MIGRATE h 1 k 0 10 KEYS a b", loaded: want{write: true, redis: true}},
		{cmd: "SORT l BY w_* GET store LIMIT 0 1 STORE d1 STORE d2", loaded: want{keys: "l d2", write: true, redis: true}},
		{cmd: "SORT l", loaded: want{keys: "l", write: true, redis: true}},
		{cmd: "XREAD COUNT 1 STREAMS s1 s2 0 0", loaded: want{keys: "s1 s2", blocking: true, redis: true}},
		{cmd: "XREADGROUP GROUP g c BLOCK 0 STREAMS s1 >", loaded: want{keys: "s1", write: true, blocking: true, redis: true}},
		{cmd: "GEORADIUS g 0 0 1 km STORE d", loaded: want{keys: "g d", write: true, redis: true}},
		{cmd: "EVAL s 2 a b x", loaded: want{keys: "a b", write: true, redis: true}, unloaded: want{keys: "a b", write: true}},
		{cmd: "FCALL f 1 a x", loaded: want{keys: "a", write: true, redis: true}, unloaded: want{keys: "a", write: true}},
		{cmd: "BLMPOP 0 2 a b LEFT", loaded: want{keys: "a b", write: true, blocking: true, redis: true}, unloaded: want{keys: "a b"}},
		{cmd: "NOSUCHCOMMAND x", loaded: want{}},
	} {
		args := bytesArgs(strings.Fields(tc.cmd))
		for i, a := range args {
			if string(a) == `""` {
				args[i] = []byte{}
			}
		}
		for _, table := range []struct {
			name string
			t    *commandTable
			want want
		}{{"loaded", loaded, tc.loaded}, {"unloaded", nil, tc.unloaded}} {
			if tc.sameWhole {
				table.want = tc.loaded
				table.want.redis = table.t != nil
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

// TestNeedsOwn: what moves a session on a shared upstream connection to one
// of its own, the same with Redis' COMMAND table and without it.
func TestNeedsOwn(t *testing.T) {
	loaded := realCommandTable(t)
	for _, tc := range []struct {
		cmd string
		own bool
	}{
		{"GET k", false}, {"SET k v", false}, {"MGET a b", false}, {"EVAL s 1 k", false}, {"PING", false},
		{"SELECT 0", false}, {"select 1", true}, {"SELECT 00", true}, {"SELECT", true},
		{"HELLO", false}, {"HELLO 2", false}, {"HELLO 3", true}, {"HELLO 2 SETNAME x", true}, {"hello 2 AUTH u p", true},
		{"AUTH p", true}, {"AUTH u p", true}, {"MULTI", true}, {"WATCH k", true}, {"RESET", true},
		{"EXEC", false}, {"DISCARD", false}, {"UNWATCH", false},
		{"BLPOP a 0", true}, {"BRPOP a 0", true}, {"BLMOVE a b LEFT RIGHT 0", true}, {"BZPOPMIN z 0", true},
		{"BLMPOP 0 1 a LEFT", true}, {"BZMPOP 0 1 z MIN", true}, {"BRPOPLPUSH a b 0", true},
		{"WAIT 1 0", true}, {"WAITAOF 1 0 0", true},
		{"XREAD COUNT 1 STREAMS s 0", false}, {"XREAD BLOCK 0 STREAMS s $", true}, {"xread count 1 block 10 streams s $", true},
		{"XREAD STREAMS block 0", false}, {"XREADGROUP GROUP g c BLOCK 0 STREAMS s >", true}, {"XREADGROUP GROUP g c STREAMS s >", false},
		{"SUBSCRIBE a", true}, {"PSUBSCRIBE a*", true}, {"SSUBSCRIBE a", true}, {"UNSUBSCRIBE", false},
		{"MONITOR", true}, {"SYNC", true}, {"PSYNC ? -1", true}, {"REPLCONF listening-port 1", true},
		{"CLIENT SETNAME x", true}, {"CLIENT TRACKING ON", true}, {"CLIENT REPLY OFF", true}, {"CLIENT CACHING yes", true},
		{"CLIENT NO-EVICT on", true}, {"CLIENT NO-TOUCH on", true}, {"READONLY", true}, {"READWRITE", true}, {"ASKING", true},
		{"CLIENT ID", false}, {"CLIENT LIST", false}, {"CLIENT GETNAME", false}, {"CLIENT SETINFO lib-name x", false},
		{"QUIT", false}, {"NOSUCHCOMMAND", false},
	} {
		args := bytesArgs(strings.Fields(tc.cmd))
		for _, table := range []struct {
			name string
			t    *commandTable
		}{{"loaded", loaded}, {"unloaded", nil}} {
			if got := table.t.classify(args).needsOwn(args); got != tc.own {
				t.Errorf("%s, %s table: needs its own connection %v, want %v", tc.cmd, table.name, got, tc.own)
			}
		}
	}
}
