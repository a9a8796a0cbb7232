// Command pipefloor is the floor of any proxy in Go that gives each client
// an upstream connection of its own, as hotspot-proxy does: it copies bytes
// both ways through a buffer of its own (as a proxy that reads its commands
// must; not spliced in the kernel) and parses nothing, counts nothing,
// reports nothing. Put in front
// of Redis beside the proxy (deployments/local/proxy-bench.sh), it shows how
// much of the gap to direct is the extra hop itself on this machine and how
// much is the proxy's own work.
//
//	pipefloor [-listen 127.0.0.1:26395] [-redis 127.0.0.1:16379]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:26395", "address the clients connect to")
	upstream := flag.String("redis", "127.0.0.1:16379", "the server every connection is piped to")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipefloor:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintln(os.Stderr, "pipefloor:", err)
			os.Exit(1)
		}
		go pipe(c.(*net.TCPConn), *upstream)
	}
}

// pipe copies c to a new connection to upstream and back until both
// directions end, passing each side's end of input on as a half close.
func pipe(c *net.TCPConn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	uc := u.(*net.TCPConn)
	defer uc.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyThrough(uc, c)
		_ = uc.CloseWrite()
	}()
	copyThrough(c, uc)
	_ = c.CloseWrite()
	<-done
}

// copyThrough copies src to dst through a 32 KiB buffer in user space:
// io.Copy between two TCP connections would splice them in the kernel.
func copyThrough(dst io.Writer, src io.Reader) {
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 32<<10))
}
