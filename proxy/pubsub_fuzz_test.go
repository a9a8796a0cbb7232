package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// pubsubOps are the commands FuzzPubSubPipeline draws from: Pub/Sub ones
// with one channel, several or none, and plain ones. {c} is the run's
// channel and key prefix.
var pubsubOps = [][]string{
	{"SUBSCRIBE", "{c}a"},
	{"SUBSCRIBE", "{c}a", "{c}b"},
	{"UNSUBSCRIBE"},
	{"UNSUBSCRIBE", "{c}a"},
	{"UNSUBSCRIBE", "{c}a", "{c}b", "{c}c"},
	{"PSUBSCRIBE", "{c}p*"},
	{"PUNSUBSCRIBE"},
	{"PUNSUBSCRIBE", "{c}p*", "{c}q*"},
	{"SUNSUBSCRIBE", "{c}s1", "{c}s2"},
	{"PUBLISH", "{c}a", "m"},
	{"PING"},
	{"PING", "x"},
	{"ECHO", "y"},
	{"SET", "{c}k", "1"},
	{"GET", "{c}k"},
	{"GET", "{c}none"},
}

// pubsubPipeline turns fuzz input into a pipeline: its first byte picks
// RESP2 or RESP3, each other one a command of pubsubOps (at most 24).
func pubsubPipeline(in []byte, prefix string) (resp3 bool, cmds [][]string) {
	if len(in) == 0 {
		return false, nil
	}
	resp3 = in[0]&1 == 1
	for _, b := range in[1:min(len(in), 25)] {
		op := pubsubOps[int(b)%len(pubsubOps)]
		cmd := make([]string, len(op))
		for i, a := range op {
			cmd[i] = strings.ReplaceAll(a, "{c}", prefix)
		}
		cmds = append(cmds, cmd)
	}
	return resp3, cmds
}

// runPipeline sends the pipeline in one write on a new connection to addr,
// then PING end, and returns every message until the one that names end
// (its connection's HELLO id masked). A reply that does not come is an
// error message of the test's own.
func runPipeline(t *testing.T, addr string, resp3 bool, cmds [][]string) [][]byte {
	c := dialRaw(t, addr)
	defer c.close()
	var out [][]byte
	if resp3 {
		out = append(out, redactHello(c.do("HELLO", "3")))
	}
	var b []byte
	for _, cmd := range cmds {
		b = append(b, encode(cmd...)...)
	}
	b = append(b, encode("PING", "end-of-pipeline")...)
	if _, err := c.c.Write(b); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.tryRead(2 * time.Second)
		if err != nil {
			return append(out, []byte("no reply: "+err.Error()))
		}
		out = append(out, m)
		if bytes.Contains(m, []byte("end-of-pipeline")) {
			return out
		}
	}
}

// FuzzPubSubPipeline compares, byte for byte, what Redis sends for a
// pipeline of Pub/Sub and plain commands, directly and through the proxy,
// in RESP2 and RESP3: (P|S)UNSUBSCRIBE sends one message per channel, one
// without channels and subscriptions, and push messages in RESP3. The seed
// corpus runs in every `go test`; `go test -fuzz FuzzPubSubPipeline` looks
// for more.
func FuzzPubSubPipeline(f *testing.F) {
	rs := stacktest.StartRedisServer(f)
	tp := startProxy(f, rs.Addr, nil)
	for _, seed := range [][]byte{
		{0, 4, 10, 12},       // RESP2: UNSUBSCRIBE a b c, PING x, ECHO y
		{1, 4, 10, 12},       // RESP3: the same
		{1, 3},               // RESP3: UNSUBSCRIBE a
		{0, 2, 6, 12},        // no subscription: UNSUBSCRIBE, PUNSUBSCRIBE, ECHO
		{1, 2, 6, 8, 13, 14}, // RESP3: UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE s1 s2, SET, GET
		{0, 1, 9, 10, 2, 12}, // RESP2: SUBSCRIBE a b, PUBLISH (refused), PING, UNSUBSCRIBE, ECHO
		{1, 1, 9, 13, 4, 14}, // RESP3: SUBSCRIBE a b, PUBLISH a, SET, UNSUBSCRIBE a b c, GET
		{0, 5, 7, 11, 15},    // RESP2: PSUBSCRIBE, PUNSUBSCRIBE two, PING, GET
	} {
		f.Add(seed)
	}
	admin := newRedis(rs.Addr)
	f.Cleanup(func() { admin.Close() })
	run := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		run++
		prefix := fmt.Sprintf("fz%d:", run)
		resp3, cmds := pubsubPipeline(in, prefix)
		if len(cmds) == 0 {
			return
		}
		clean := func() { admin.Del(context.Background(), prefix+"k") }
		clean()
		direct := runPipeline(t, rs.Addr, resp3, cmds)
		clean()
		proxied := runPipeline(t, tp.addr, resp3, cmds)
		if len(direct) != len(proxied) {
			t.Fatalf("%v (RESP3 %v): %d messages directly, %d through the proxy:\ndirect %q\nproxy  %q",
				cmds, resp3, len(direct), len(proxied), direct, proxied)
		}
		for i := range direct {
			if !bytes.Equal(direct[i], proxied[i]) {
				t.Fatalf("%v (RESP3 %v): message %d differs:\ndirect %q\nproxy  %q", cmds, resp3, i, direct[i], proxied[i])
			}
		}
	})
}
