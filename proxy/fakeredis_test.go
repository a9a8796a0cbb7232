package proxy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/redcon"
)

// fakeRedis is a small in-memory Redis for the tests that need Redis'
// behaviour only in outline: strings and hashes, SELECT, HELLO (RESP2
// only), CLIENT, Pub/Sub confirmations, and the COMMAND table of a real
// Redis 7.0 (testdata/command-redis-7.0.resp). It counts the commands it
// runs, by lowercase name, and which connection (numbered from 1 in the
// order accepted) set each key last. ECHO die closes the connection at once,
// after the replies before it, as Redis killed there would: the commands
// after it on the connection are never answered.
type fakeRedis struct {
	ln net.Listener

	mu         sync.Mutex
	strs       map[string]string
	hashes     map[string]map[string]string
	calls      map[string]int
	commandErr string         // COMMAND's reply while set (an ACL refusal)
	conns      int            // connections accepted
	setBy      map[string]int // key: the connection that set it last
}

var commandTableReply = sync.OnceValue(func() []byte {
	b, err := os.ReadFile("testdata/command-redis-7.0.resp")
	if err != nil {
		panic(err)
	}
	return b
})

func newFakeRedis(t *testing.T) *fakeRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{ln: ln, strs: map[string]string{}, hashes: map[string]map[string]string{}, calls: map[string]int{},
		setBy: map[string]int{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			f.mu.Lock()
			f.conns++
			id := f.conns
			f.mu.Unlock()
			wg.Go(func() { f.serve(c, id) })
		}
	})
	return f
}

func (f *fakeRedis) addr() string { return f.ln.Addr().String() }

// count returns how many times the fake ran cmd (lowercase).
func (f *fakeRedis) count(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[cmd]
}

func (f *fakeRedis) setCommandErr(e string) {
	f.mu.Lock()
	f.commandErr = e
	f.mu.Unlock()
}

// setters returns how many connections set the keys named.
func (f *fakeRedis) setters(keys []string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	by := map[int]bool{}
	for _, k := range keys {
		by[f.setBy[k]] = true
	}
	return len(by)
}

func (f *fakeRedis) serve(c net.Conn, id int) {
	defer c.Close()
	rd := redcon.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		cmds, err := rd.ReadCommands()
		if err != nil {
			return
		}
		for _, cmd := range cmds {
			if len(cmd.Args) == 2 && strings.EqualFold(string(cmd.Args[0]), "echo") && string(cmd.Args[1]) == "die" {
				_ = w.Flush()
				return
			}
			if len(cmd.Args) > 1 && strings.EqualFold(string(cmd.Args[0]), "set") {
				f.mu.Lock()
				f.setBy[string(cmd.Args[1])] = id
				f.mu.Unlock()
			}
			reply, quit := f.run(cmd.Args)
			_, _ = w.Write(reply)
			if quit {
				_ = w.Flush()
				return
			}
		}
		if w.Flush() != nil {
			return
		}
	}
}

func bulk(s string) []byte { return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(s), s) }

// run runs one command; quit closes the connection after the reply.
func (f *fakeRedis) run(args [][]byte) (reply []byte, quit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.ToLower(string(args[0]))
	f.calls[name]++
	a := func(i int) string { return string(args[i]) }
	arity := func(n int) bool { return len(args) >= n }
	switch {
	case name == "ping" && len(args) == 1:
		return []byte("+PONG\r\n"), false
	case name == "ping", name == "echo" && arity(2):
		return bulk(a(1)), false
	case name == "quit":
		return []byte("+OK\r\n"), true
	case name == "select" && arity(2), name == "client" && arity(2) && !strings.EqualFold(a(1), "id"),
		name == "readonly", name == "readwrite":
		return []byte("+OK\r\n"), false
	case name == "client":
		return []byte(":7\r\n"), false
	case name == "command":
		if f.commandErr != "" {
			return []byte(f.commandErr), false
		}
		return commandTableReply(), false
	case name == "get" && len(args) == 2:
		v, ok := f.strs[a(1)]
		if !ok {
			if _, isHash := f.hashes[a(1)]; isHash {
				return []byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"), false
			}
			return []byte("$-1\r\n"), false
		}
		return bulk(v), false
	case name == "set" && arity(3):
		f.strs[a(1)] = a(2)
		delete(f.hashes, a(1))
		return []byte("+OK\r\n"), false
	case name == "del" && arity(2), name == "unlink" && arity(2):
		n := 0
		for _, k := range args[1:] {
			if _, ok := f.strs[string(k)]; ok {
				n++
			} else if _, ok := f.hashes[string(k)]; ok {
				n++
			}
			delete(f.strs, string(k))
			delete(f.hashes, string(k))
		}
		return fmt.Appendf(nil, ":%d\r\n", n), false
	case name == "mget" && arity(2):
		b := fmt.Appendf(nil, "*%d\r\n", len(args)-1)
		for _, k := range args[1:] {
			if v, ok := f.strs[string(k)]; ok {
				b = append(b, bulk(v)...)
			} else {
				b = append(b, "$-1\r\n"...)
			}
		}
		return b, false
	case (name == "subscribe" || name == "psubscribe" || name == "unsubscribe" || name == "punsubscribe") && arity(2):
		var b []byte
		for i, ch := range args[1:] {
			b = append(b, "*3\r\n"...)
			b = append(append(b, bulk(name)...), bulk(string(ch))...)
			b = fmt.Appendf(b, ":%d\r\n", i+1)
		}
		return b, false
	case name == "publish" && len(args) == 3:
		return []byte(":0\r\n"), false
	}
	if b := f.runHash(name, args); b != nil {
		return b, false
	}
	return fmt.Appendf(nil, "-ERR unknown command '%s', with args beginning with: \r\n", a(0)), false
}

// runHash runs a hash command; nil for any other.
func (f *fakeRedis) runHash(name string, args [][]byte) []byte {
	a := func(i int) string { return string(args[i]) }
	arity := func(n int) bool { return len(args) >= n }
	switch {
	case name == "hset" && arity(4) && len(args)%2 == 0:
		h := f.hashes[a(1)]
		if h == nil {
			h = map[string]string{}
			f.hashes[a(1)] = h
		}
		n := 0
		for i := 2; i+1 < len(args); i += 2 {
			if _, ok := h[a(i)]; !ok {
				n++
			}
			h[a(i)] = a(i + 1)
		}
		return fmt.Appendf(nil, ":%d\r\n", n)
	case name == "hget" && len(args) == 3:
		if v, ok := f.hashes[a(1)][a(2)]; ok {
			return bulk(v)
		}
		return []byte("$-1\r\n")
	case name == "hmget" && arity(3):
		b := fmt.Appendf(nil, "*%d\r\n", len(args)-2)
		for _, fl := range args[2:] {
			if v, ok := f.hashes[a(1)][string(fl)]; ok {
				b = append(b, bulk(v)...)
			} else {
				b = append(b, "$-1\r\n"...)
			}
		}
		return b
	case name == "hgetall" && len(args) == 2:
		h := f.hashes[a(1)]
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b := fmt.Appendf(nil, "*%d\r\n", 2*len(h))
		for _, k := range keys {
			b = append(append(b, bulk(k)...), bulk(h[k])...)
		}
		return b
	}
	return nil
}
