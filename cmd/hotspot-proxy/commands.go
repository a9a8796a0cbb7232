package main

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// cmdInfo is what the proxy knows of a command, from the upstream's COMMAND
// table.
type cmdInfo struct {
	name       string
	write      bool
	readonly   bool
	movable    bool // keys not given by first/last/step alone
	blocking   bool
	first      int // first key's position, 0: no key
	last       int // last key's position, negative from the end
	step       int
	cacheable  bool // readonly, one key, answered the same to any client: may be served from L1
	numkeysArg int  // position of a numkeys argument (EVAL, ZUNION...), 0 if none
}

// commandTable maps lowercase command names to their info.
type commandTable struct {
	m map[string]*cmdInfo
}

// Read-only one-key commands whose reply is not a function of the key's
// value and arguments alone: never served from L1.
var notCacheable = []string{
	"ttl", "pttl", "expiretime", "pexpiretime", "object", "touch", "srandmember", "hrandfield", "zrandmember",
	"sort_ro", "memory", "debug", "dump", "type", "exists", "httl", "hpttl", "hexpiretime", "hpexpiretime",
	"xread", "xreadgroup", "xpending", "xinfo", "waitaof", "wait",
}

// Commands with a numkeys argument: its position, the keys following it.
var numkeysAt = map[string]int{
	"eval": 2, "evalsha": 2, "eval_ro": 2, "evalsha_ro": 2, "fcall": 2, "fcall_ro": 2,
	"zunion": 1, "zinter": 1, "zdiff": 1, "zintercard": 1, "sintercard": 1,
	"zunionstore": 2, "zinterstore": 2, "zdiffstore": 2,
	"lmpop": 1, "zmpop": 1, "blmpop": 2, "bzmpop": 2,
}

// Commands that are not flagged "write" but change keys (scripts, functions).
var writesKeys = []string{"eval", "evalsha", "fcall"}

// loadCommands reads the upstream's COMMAND table.
func loadCommands(ctx context.Context, rdb redis.UniversalClient) (*commandTable, error) {
	infos, err := rdb.Command(ctx).Result()
	if err != nil {
		return nil, err
	}
	t := &commandTable{m: make(map[string]*cmdInfo, len(infos))}
	for name, ci := range infos {
		in := &cmdInfo{name: name, first: int(ci.FirstKeyPos), last: int(ci.LastKeyPos), step: int(ci.StepCount)}
		in.write = slices.Contains(ci.Flags, "write") || slices.Contains(writesKeys, name)
		in.readonly = ci.ReadOnly || slices.Contains(ci.Flags, "readonly")
		in.movable = slices.Contains(ci.Flags, "movablekeys")
		in.numkeysArg = numkeysAt[name]
		in.blocking = slices.Contains(ci.Flags, "blocking")
		in.cacheable = in.readonly && !in.write && !in.movable && !in.blocking && in.first == 1 && in.last == 1 &&
			!slices.Contains(notCacheable, name)
		t.m[name] = in
	}
	return t, nil
}

// lookup returns name's info (any case), nil for a command the table lacks.
func (t *commandTable) lookup(name []byte) *cmdInfo {
	if t == nil || len(name) > 32 {
		return nil
	}
	var buf [32]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t.m[string(buf[:len(name)])]
}

// keys appends the keys of args (args[0] is the command) to dst.
func (in *cmdInfo) keys(dst [][]byte, args [][]byte) [][]byte {
	if in.numkeysArg > 0 {
		p := in.numkeysArg
		if p >= len(args) {
			return dst
		}
		n, err := strconv.Atoi(string(args[p]))
		if err != nil || n < 0 {
			return dst
		}
		if in.first > 0 && in.first < p { // the destination of ZUNIONSTORE and the like
			dst = append(dst, args[in.first])
		}
		for i := p + 1; i <= p+n && i < len(args); i++ {
			dst = append(dst, args[i])
		}
		return dst
	}
	if in.first <= 0 {
		return dst
	}
	last := in.last
	if last < 0 {
		last = len(args) + last
	}
	step := max(in.step, 1)
	for i := in.first; i <= last && i < len(args); i += step {
		dst = append(dst, args[i])
	}
	return dst
}

// getKeys says whether args' keys need the upstream's COMMAND GETKEYS: the
// command's keys move (SORT ... STORE, GEORADIUS ... STORE, MIGRATE ... KEYS,
// XREAD ... STREAMS) and no numkeys argument gives them.
func (in *cmdInfo) getKeys() bool { return in.movable && in.numkeysArg == 0 }

// getKeysTimeout bounds a COMMAND GETKEYS.
const getKeysTimeout = 250 * time.Millisecond

// movableKeys appends the keys of args to dst as the upstream names them
// (COMMAND GETKEYS, one round trip: these commands are rare), or, if it does
// not answer in time (or refuses args), those at the command's fixed
// positions.
func movableKeys(rdb redis.UniversalClient, in *cmdInfo, dst, args [][]byte) [][]byte {
	ctx, cancel := context.WithTimeout(context.Background(), getKeysTimeout)
	defer cancel()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	keys, err := rdb.CommandGetKeys(ctx, cmd...).Result()
	if err != nil {
		return in.keys(dst, args)
	}
	for _, k := range keys {
		dst = append(dst, []byte(k))
	}
	return dst
}

// commands holds the table, loaded in the background until the upstream
// answers. Until then every command passes through: none is answered from
// L1, reported, or invalidates a hot key, so the proxy waits for it before
// it serves (wait).
type commands struct {
	t      atomic.Pointer[commandTable]
	loaded chan struct{} // closed once t is set
}

func newCommands() *commands { return &commands{loaded: make(chan struct{})} }

func (c *commands) get() *commandTable { return c.t.Load() }

// has is 1 once the table is there, else 0.
func (c *commands) has() int {
	if c.get() == nil {
		return 0
	}
	return 1
}

// wait waits for the table, d at most, and reports whether it is there.
func (c *commands) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.loaded:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// load tries until it has the table or ctx ends.
func (c *commands) load(ctx context.Context, rdb redis.UniversalClient, logf func(error)) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := loadCommands(cctx, rdb)
		cancel()
		if err == nil {
			c.t.Store(t)
			close(c.loaded)
			return
		}
		logf(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}
