// Command respfloor is the floor of any RESP server or proxy on this
// machine: it answers every command without doing anything (GET with a
// 3-byte value, anything else with +OK), so redis-benchmark against it
// measures what the I/O model alone costs. Two models, with the same parser:
//
//   - goroutines: a goroutine per connection on Go's net package, as
//     hotspot-proxy's sessions are;
//   - gnet: github.com/panjf2000/gnet/v2's event loops (one per core), as an
//     event-loop rewrite of the proxy would be.
//
// It is a module of its own, so that gnet is not a dependency of Hotspot.
// deployments/local/proxy-peers.sh runs it beside the proxies (floor=MODEL;
// BENCHMARKS.md X4e).
//
//	respfloor [-listen 127.0.0.1:26397] [-loop goroutines|gnet]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:26397", "address the clients connect to")
	loop := flag.String("loop", "goroutines", "the I/O model: goroutines or gnet")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch *loop {
	case "goroutines":
		err = serveGoroutines(ctx, *listen)
	case "gnet":
		err = serveGnet(ctx, *listen)
	default:
		err = fmt.Errorf("unknown -loop %q (goroutines or gnet)", *loop)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "respfloor:", err)
		os.Exit(1)
	}
}

var (
	bulkReply = []byte("$3\r\nbar\r\n")
	okReply   = []byte("+OK\r\n")
	errBad    = errors.New("protocol error")
)

// answer appends the replies to every whole command at the start of in and
// returns them with the bytes those commands took.
func answer(in, out []byte) ([]byte, int, error) {
	used := 0
	for {
		n, get, err := command(in[used:])
		if err != nil || n == 0 {
			return out, used, err
		}
		used += n
		if get {
			out = append(out, bulkReply...)
		} else {
			out = append(out, okReply...)
		}
	}
}

// command returns the length of the whole command at the start of b (0 if
// it is not all there yet) and whether it is a GET.
func command(b []byte) (n int, get bool, err error) {
	line, rest, ok := cutLine(b)
	if !ok {
		return 0, false, nil
	}
	if len(line) < 2 || line[0] != '*' {
		return 0, false, errBad
	}
	args, err := strconv.Atoi(string(line[1:]))
	if err != nil || args < 1 {
		return 0, false, errBad
	}
	for i := range args {
		line, after, ok := cutLine(rest)
		if !ok {
			return 0, false, nil
		}
		if len(line) < 2 || line[0] != '$' {
			return 0, false, errBad
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil || size < 0 {
			return 0, false, errBad
		}
		if len(after) < size+2 {
			return 0, false, nil
		}
		if i == 0 {
			get = len(after) >= 3 && size == 3 && bytes.EqualFold(after[:3], []byte("GET"))
		}
		rest = after[size+2:]
	}
	return len(b) - len(rest), get, nil
}

func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return nil, b, false
	}
	return b[:i], b[i+2:], true
}

func serveGoroutines(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 0, 16<<10)
			var out []byte
			for {
				if len(buf) == cap(buf) {
					buf = append(buf, 0)[:len(buf)]
				}
				n, err := c.Read(buf[len(buf):cap(buf)])
				if err != nil {
					return
				}
				buf = buf[:len(buf)+n]
				var used int
				out, used, err = answer(buf, out[:0])
				if err != nil {
					return
				}
				buf = buf[:copy(buf, buf[used:])]
				if len(out) == 0 {
					continue // the rest of a command is still to come
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}

type gnetFloor struct {
	gnet.BuiltinEventEngine
	ctx context.Context
}

func (s *gnetFloor) OnBoot(eng gnet.Engine) gnet.Action {
	go func() {
		<-s.ctx.Done()
		_ = eng.Stop(context.Background())
	}()
	return gnet.None
}

func (*gnetFloor) OnTraffic(c gnet.Conn) gnet.Action {
	in, err := c.Peek(-1)
	if err != nil && !errors.Is(err, io.ErrShortBuffer) {
		return gnet.Close
	}
	out, _ := c.Context().([]byte) // the connection's reply buffer, kept between calls
	out, used, err := answer(in, out[:0])
	if err != nil {
		return gnet.Close
	}
	c.SetContext(out)
	_, _ = c.Discard(used)
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			return gnet.Close
		}
	}
	return gnet.None
}

func serveGnet(ctx context.Context, addr string) error {
	return gnet.Run(&gnetFloor{ctx: ctx}, "tcp://"+addr, gnet.WithMulticore(true))
}
