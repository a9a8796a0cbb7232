package proxy

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// cmdInfo is what the proxy knows of a command: how a session treats it
// (the proxy's own classification, the table below) and, once Redis'
// COMMAND table is read, its flags and key positions there.
type cmdInfo struct {
	name string // lowercase; a subcommand's is "container|sub"

	// The proxy's own classification.
	kind    cmdKind
	barrier bool    // a later answer from L1 waits until its reply is in (the connection's state may change)
	pipe    bool    // the session becomes a plain pipe both ways with it, for good
	state   bool    // cluster mode: connection state, replayed on each new upstream connection
	noCache bool    // read-only with one key, but its reply is not a function of the key's value and arguments alone
	own     ownRule // shared upstream mode: whether the session needs an upstream connection of its own for it

	// From Redis' COMMAND table (key positions may also be the proxy's own).
	redis      bool // the entry has Redis' information
	write      bool
	readonly   bool
	movable    bool // keys not given by first/last/step alone
	blocking   bool
	first      int // first key's position, 0: no key
	last       int // last key's position, negative from the end
	step       int
	cacheable  bool                              // readonly, one key, answered the same to any client: may be served from L1
	numkeysArg int                               // position of a numkeys argument (EVAL, ZUNION...), 0 if none: without key specs (Redis before 7)
	specs      []keySpec                         // Redis 7's key specifications
	proc       func(dst, args [][]byte) [][]byte // Redis' procedure that finds its keys (SORT, MIGRATE)

	sub map[string]*cmdInfo // subcommands the proxy classifies (CLIENT SETNAME...), by lowercase name
}

// cmdKind is what a command means to the proxy beyond forwarding it.
type cmdKind uint8

const (
	kindPlain       cmdKind = iota
	kindSelect              // SELECT: the database
	kindHello               // HELLO: the protocol
	kindMulti               // MULTI
	kindExec                // EXEC or DISCARD: the transaction ends
	kindWatch               // WATCH
	kindUnwatch             // UNWATCH
	kindReset               // RESET: every piece of state back to its default
	kindSetName             // CLIENT SETNAME: app:NAME picks the app
	kindAuth                // AUTH
	kindHotspot             // HOTSPOT INFO, HOTSPOT KEYS: the proxy's own
	kindCluster             // CLUSTER: cluster mode answers SLOTS, NODES... itself
	kindQuit                // QUIT
	kindAsking              // ASKING: cluster mode answers it
	kindReadonly            // READONLY, READWRITE
	kindSetInfo             // CLIENT SETINFO
	kindUnsubscribe         // (P|S)UNSUBSCRIBE: one message per channel, or one without, pushes in RESP3
	kindGet                 // GET: a hot key's value answers it from L1
	kindMGet                // MGET: answered from L1 when every key is hot
)

// ownRule says whether a command needs an upstream connection of the
// session's own (Config.Upstream "shared"): one whose effect is on the
// connection that runs it (its state, its reply mode, its blocking) cannot
// run on a connection other clients share.
type ownRule uint8

const (
	ownNo      ownRule = iota // runs on a shared connection (but see needsOwn: pipe mode and Redis' blocking flag)
	ownAlways                 // the connection's state, blocking, or per-connection behaviour
	ownSelect                 // SELECT: unless of database 0, the shared connections' own
	ownHello                  // HELLO: unless without arguments or "HELLO 2" alone (RESP2, no AUTH, no SETNAME)
	ownIfBlock                // XREAD, XREADGROUP: with a BLOCK option
)

// needsOwn reports whether the command args (of entry in) must run on an
// upstream connection of the session's own.
func (in *cmdInfo) needsOwn(args [][]byte) bool {
	switch in.own {
	case ownAlways:
		return true
	case ownSelect:
		return len(args) != 2 || string(args[1]) != "0"
	case ownHello:
		return len(args) > 2 || (len(args) == 2 && string(args[1]) != "2")
	case ownIfBlock:
		for _, a := range args[1:] {
			if eqFold(a, "streams") { // the options end here; keys and IDs follow
				break
			}
			if eqFold(a, "block") {
				return true
			}
		}
		return false
	}
	return in.pipe || in.blocking
}

// builtin is the proxy's own classification of commands: the one place
// that says which command changes the connection's state, turns it into a
// pipe, or is answered by the proxy. Redis' COMMAND table adds flags and key
// positions to these entries, and entries of its own for every other
// command.
var builtin = func() map[string]*cmdInfo {
	m := map[string]*cmdInfo{}
	add := func(in cmdInfo, names ...string) {
		for _, n := range names {
			e := in
			e.name = n
			if c, s, ok := strings.Cut(n, "|"); ok {
				if m[c] == nil {
					m[c] = &cmdInfo{name: c}
				}
				if m[c].sub == nil {
					m[c].sub = map[string]*cmdInfo{}
				}
				m[c].sub[s] = &e
				continue
			}
			if old := m[n]; old != nil {
				e.sub = old.sub
			}
			m[n] = &e
		}
	}
	add(cmdInfo{kind: kindHotspot}, "hotspot")
	add(cmdInfo{kind: kindSelect, barrier: true}, "select")
	add(cmdInfo{kind: kindHello, barrier: true, state: true}, "hello")
	add(cmdInfo{kind: kindMulti, barrier: true}, "multi")
	add(cmdInfo{kind: kindExec, barrier: true}, "exec", "discard")
	add(cmdInfo{kind: kindWatch, barrier: true}, "watch")
	add(cmdInfo{kind: kindUnwatch, barrier: true}, "unwatch")
	add(cmdInfo{kind: kindReset, barrier: true}, "reset")
	add(cmdInfo{kind: kindAuth, barrier: true, state: true}, "auth")
	add(cmdInfo{pipe: true}, "subscribe", "psubscribe", "monitor", "sync", "psync", "client|reply", "client|tracking")
	add(cmdInfo{pipe: true, first: 1, last: -1, step: 1}, "ssubscribe") // keys: every channel (a cluster session routes by them)
	add(cmdInfo{kind: kindUnsubscribe, first: 1, last: -1, step: 1}, "sunsubscribe")
	add(cmdInfo{kind: kindUnsubscribe}, "unsubscribe", "punsubscribe")
	add(cmdInfo{kind: kindSetName, barrier: true, state: true}, "client|setname")
	add(cmdInfo{kind: kindSetInfo, state: true}, "client|setinfo")
	add(cmdInfo{kind: kindReadonly, state: true}, "readonly", "readwrite")
	add(cmdInfo{kind: kindCluster}, "cluster")
	add(cmdInfo{kind: kindQuit}, "quit")
	add(cmdInfo{kind: kindAsking}, "asking")
	add(cmdInfo{kind: kindGet}, "get")
	add(cmdInfo{kind: kindMGet}, "mget")
	add(cmdInfo{noCache: true}, "ttl", "pttl", "expiretime", "pexpiretime", "object", "touch", "srandmember", "hrandfield",
		"zrandmember", "sort_ro", "memory", "debug", "dump", "type", "exists", "httl", "hpttl", "hexpiretime", "hpexpiretime",
		"xread", "xreadgroup", "xpending", "xinfo", "waitaof", "wait")
	// Commands with a numkeys argument: its position, the keys following it.
	for name, at := range map[string]int{
		"eval": 2, "evalsha": 2, "eval_ro": 2, "evalsha_ro": 2, "fcall": 2, "fcall_ro": 2,
		"zunion": 1, "zinter": 1, "zdiff": 1, "zintercard": 1, "sintercard": 1,
		"zunionstore": 2, "zinterstore": 2, "zdiffstore": 2,
		"lmpop": 1, "zmpop": 1, "blmpop": 2, "bzmpop": 2,
	} {
		add(cmdInfo{numkeysArg: at}, name)
	}
	// Not flagged "write" but they change keys (scripts, functions).
	for _, name := range []string{"eval", "evalsha", "fcall"} {
		m[name].write = true
	}
	// What needs an upstream connection of its own in shared mode, beyond
	// pipe mode and Redis' blocking flag: so classified without Redis'
	// COMMAND table too.
	own := func(r ownRule, names ...string) {
		for _, n := range names {
			c, sub, ok := strings.Cut(n, "|")
			e := m[c]
			if ok && e != nil {
				e = e.sub[sub]
			}
			if e == nil {
				add(cmdInfo{own: r}, n)
				continue
			}
			e.own = r
		}
	}
	own(ownAlways, "auth", "multi", "watch", "reset", "readonly", "readwrite", "asking", "replconf",
		"client|setname", "client|no-evict", "client|no-touch", "client|caching",
		"blpop", "brpop", "brpoplpush", "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop", "wait", "waitaof",
		"subscribe", "psubscribe", "ssubscribe", "monitor", "sync", "psync", "client|reply", "client|tracking")
	own(ownSelect, "select")
	own(ownHello, "hello")
	own(ownIfBlock, "xread", "xreadgroup")
	return m
}()

// commandTable maps lowercase command names to their info.
type commandTable struct {
	m map[string]*cmdInfo
}

// builtinTable is the table before Redis' COMMAND table is read: the proxy's
// own classification alone.
var builtinTable = &commandTable{m: builtin}

// loadCommands reads the upstream's COMMAND table.
func loadCommands(ctx context.Context, rdb redis.UniversalClient) (*commandTable, error) {
	v, err := rdb.Do(ctx, "COMMAND").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandTable(v)
}

// parseCommandTable reads a reply to COMMAND (as go-redis gives it: arrays
// as []any) and merges it into the builtin table.
func parseCommandTable(v any) (*commandTable, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("COMMAND: a reply of %T", v)
	}
	t := &commandTable{m: make(map[string]*cmdInfo, len(list)+len(builtin))}
	for name, b := range builtin {
		t.m[name] = b
	}
	for _, e := range list {
		in, subs, err := parseCommandEntry(e, builtin)
		if err != nil {
			return nil, err
		}
		if len(subs) > 0 {
			in.sub = make(map[string]*cmdInfo, len(subs))
			var bsub map[string]*cmdInfo
			if b := builtin[in.name]; b != nil {
				bsub = b.sub
			}
			for _, se := range subs {
				s, _, err := parseCommandEntry(se, nil)
				if err != nil {
					return nil, err
				}
				_, subName, _ := strings.Cut(s.name, "|")
				if b := bsub[subName]; b != nil {
					s = merge(b, s)
				} else if b := builtin[in.name]; b != nil {
					// The container's classification (CLUSTER's, OBJECT's...).
					s.kind, s.barrier, s.pipe, s.state, s.noCache, s.own = b.kind, b.barrier, b.pipe, b.state, b.noCache, b.own
					s.cacheable = s.cacheable && !s.noCache
				}
				in.sub[subName] = s
			}
			for name, b := range bsub { // the proxy's own, which this Redis lacks
				if in.sub[name] == nil {
					in.sub[name] = b
				}
			}
		}
		t.m[in.name] = in
	}
	return t, nil
}

// parseCommandEntry reads one command of COMMAND's reply, merged with the
// entry of builtin of its name, and returns its subcommands' entries.
func parseCommandEntry(e any, builtin map[string]*cmdInfo) (*cmdInfo, []any, error) {
	f, ok := e.([]any)
	if !ok || len(f) < 6 {
		return nil, nil, fmt.Errorf("COMMAND: an entry of %T", e)
	}
	in := &cmdInfo{name: strings.ToLower(asString(f[0])), redis: true,
		first: asInt(f[3]), last: asInt(f[4]), step: asInt(f[5])}
	flags := asStrings(f[2])
	in.write = slices.Contains(flags, "write")
	in.readonly = slices.Contains(flags, "readonly")
	in.movable = slices.Contains(flags, "movablekeys")
	in.blocking = slices.Contains(flags, "blocking")
	var subs []any
	if len(f) >= 10 {
		specs, err := parseKeySpecs(f[8])
		if err != nil {
			return nil, nil, fmt.Errorf("COMMAND %s: %w", in.name, err)
		}
		in.specs = specs
		subs, _ = f[9].([]any)
	}
	in.proc = keyProcs[in.name]
	if b := builtin[in.name]; b != nil {
		in = merge(b, in)
	}
	in.cacheable = in.readonly && !in.write && !in.movable && !in.blocking && in.first == 1 && in.last == 1 && !in.noCache
	return in, subs, nil
}

// merge is Redis' entry r with the proxy's classification b: b's key
// positions stand where Redis gives none.
func merge(b, r *cmdInfo) *cmdInfo {
	in := *b
	in.redis, in.readonly, in.movable, in.blocking = true, r.readonly, r.movable, r.blocking
	in.write = b.write || r.write
	in.specs, in.proc = r.specs, r.proc
	if in.first == 0 {
		in.first, in.last, in.step = r.first, r.last, r.step
	}
	in.cacheable = in.readonly && !in.write && !in.movable && !in.blocking && in.first == 1 && in.last == 1 && !in.noCache
	return &in
}

// classify returns what the proxy knows of the command args (args[0] is its
// name, in any case): its subcommand's entry where the proxy classifies it,
// else its own, else an entry of a plain command without keys. t nil is the
// builtin table.
func (t *commandTable) classify(args [][]byte) *cmdInfo {
	if t == nil {
		t = builtinTable
	}
	in := t.lookup(args[0])
	if in == nil {
		return &unknownCommand
	}
	if in.sub != nil && len(args) > 1 {
		if s := lookupIn(in.sub, args[1]); s != nil {
			return s
		}
	}
	return in
}

// unknownCommand is the entry of a command no table has: forwarded as is.
var unknownCommand = cmdInfo{name: "?"}

// lookup returns name's info (any case), nil for a command the table lacks.
func (t *commandTable) lookup(name []byte) *cmdInfo { return lookupIn(t.m, name) }

func lookupIn(m map[string]*cmdInfo, name []byte) *cmdInfo {
	if len(name) > 32 {
		return nil
	}
	var buf [32]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return m[string(buf[:len(name)])]
}

// keys appends the keys of args (args[0] is the command) to dst: found by
// Redis' procedure for the command, else by its key specs if they move,
// else at their positions.
func (in *cmdInfo) keys(dst [][]byte, args [][]byte) [][]byte {
	switch {
	case in.proc != nil:
		return in.proc(dst, args)
	case in.movable && len(in.specs) > 0:
		return keysFromSpecs(dst, in.specs, args)
	}
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
