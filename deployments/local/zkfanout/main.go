// Command zkfanout measures what one hot-set change costs the ZooKeeper
// server that serves its watchers (issue 41; BENCHMARKS.md F3): N bare
// sessions on one server (an observer, or a participant) each read a node
// with a watch and read it again after each change, as the SDK's watcher
// does; a writer on another server changes the node C times. It prints, per
// change:
//
//   - the serving server's CPU (utime + stime of -pid, from /proc), less its
//     CPU over as long a time with the same sessions and no change, per
//     1,000 watchers;
//
//   - the time from the write's acknowledgement until the server had sent
//     N more packets (its `mntr` zk_packets_sent, polled every millisecond:
//     the notifications, which the server sends when it applies the write)
//     and 2N (the notifications and the answers to the reads that follow);
//
//   - the time until the last session had read the new data (client side);
//
//   - this process's own CPU per change (the sessions: the clients' share,
//     reported apart).
//
//     zkfanout -watch 127.0.0.1:12284 -pid PID -write 127.0.0.1:12281 -sessions 1000 -changes 20 -size 100
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

func main() {
	watch := flag.String("watch", "", "host:port of the server the sessions use (required)")
	pid := flag.Int("pid", 0, "process id of that server, for its CPU (required)")
	write := flag.String("write", "", "host:port the writer uses (default: -watch)")
	sessions := flag.Int("sessions", 1000, "watching sessions")
	changes := flag.Int("changes", 20, "changes of the node")
	size := flag.Int("size", 100, "bytes of the node")
	gap := flag.Duration("gap", 500*time.Millisecond, "time between changes, after every session has read the previous one")
	flag.Parse()
	if *watch == "" || *pid == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *write == "" {
		*write = *watch
	}
	if err := run(*watch, *write, *pid, *sessions, *changes, *size, *gap); err != nil {
		fmt.Fprintln(os.Stderr, "zkfanout:", err)
		os.Exit(1)
	}
}

func run(watchAddr, writeAddr string, pid, n, changes, size int, gap time.Duration) error {
	writer, err := connect(writeAddr)
	if err != nil {
		return err
	}
	defer writer.Close()
	path := fmt.Sprintf("/zkfanout-%d", os.Getpid())
	data := func(i int) []byte {
		b := []byte(fmt.Sprintf("change %08d ", i))
		for len(b) < size {
			b = append(b, 'x')
		}
		return b[:max(size, 16)]
	}
	if _, err := writer.Create(path, data(0), 0, zk.WorldACL(zk.PermAll)); err != nil {
		return err
	}
	defer writer.Delete(path, -1)

	// The sessions, each reading the node with a watch, then again after
	// every change; read counts the reads of the newest version.
	var read atomic.Int64
	var version atomic.Int32
	var lastRead atomic.Int64 // UnixNano of the newest such read
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := time.Now()
	for i := range n {
		c, err := connect(watchAddr)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		defer c.Close()
		_, _, ch, err := c.GetW(path)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
				}
				var st *zk.Stat
				var err error
				if _, st, ch, err = c.GetW(path); err != nil {
					return
				}
				if st.Version == version.Load() {
					read.Add(1)
					lastRead.Store(time.Now().UnixNano())
				}
			}
		})
	}
	fmt.Printf("%d sessions on %s, connected in %v; node %d bytes, %d changes\n", n, watchAddr, time.Since(start).Round(time.Millisecond), size, changes)
	time.Sleep(2 * time.Second) // the sessions' first pings

	// The changes, one at a time; then the server's CPU over as long
	// again with the same sessions and no change.
	var acked, pktN, pktAll, lastAt []time.Duration
	// busy makes the changes; poll also times the server's packets (the
	// polling costs the server CPU of its own, so the CPU is taken from a
	// run without it).
	busy := func(first int, poll bool) (server, self time.Duration, err error) {
		c0, s0 := cpu(pid), selfCPU()
		for i := first; i < first+changes; i++ {
			read.Store(0)
			var p0 int64
			if poll {
				if p0, err = packetsSent(watchAddr); err != nil {
					return 0, 0, err
				}
			}
			version.Store(int32(i))
			w0 := time.Now()
			if _, err := writer.Set(path, data(i), int32(i-1)); err != nil {
				return 0, 0, err
			}
			ack := time.Now()
			acked = append(acked, ack.Sub(w0))
			var gotN, gotAll time.Duration
			for deadline := ack.Add(30 * time.Second); read.Load() < int64(n); {
				if time.Now().After(deadline) {
					return 0, 0, fmt.Errorf("change %d: %d of %d sessions read it within 30 s", i, read.Load(), n)
				}
				if poll && gotAll == 0 {
					p, err := packetsSent(watchAddr)
					if err != nil {
						return 0, 0, err
					}
					if gotN == 0 && p-p0 >= int64(n) {
						gotN = time.Since(ack)
					}
					if p-p0 >= 2*int64(n) {
						gotAll = time.Since(ack)
					}
				}
				time.Sleep(time.Millisecond)
			}
			if poll {
				if gotAll == 0 { // every read answered before the last poll saw it
					gotAll = time.Since(ack)
					gotN = cmp.Or(gotN, gotAll)
				}
				pktN, pktAll = append(pktN, gotN), append(pktAll, gotAll)
				lastAt = append(lastAt, time.Unix(0, lastRead.Load()).Sub(ack))
			}
			time.Sleep(gap)
		}
		return cpu(pid) - c0, selfCPU() - s0, nil
	}
	if _, _, err := busy(1, true); err != nil {
		return err
	}
	t0 := time.Now()
	serverBusy, selfBusy, err := busy(1+changes, false)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	c1 := cpu(pid)
	time.Sleep(took)
	serverIdle := cpu(pid) - c1
	per := (serverBusy - serverIdle) / time.Duration(changes)
	fmt.Printf("server CPU: %v over the changes, %v idle over as long: %v per change, %v per change per 1,000 watchers\n",
		serverBusy.Round(time.Millisecond), serverIdle.Round(time.Millisecond), per.Round(time.Microsecond),
		(per * 1000 / time.Duration(n)).Round(time.Microsecond))
	fmt.Printf("sessions' own CPU (this process): %v per change\n", (selfBusy / time.Duration(changes)).Round(time.Microsecond))
	fmt.Printf("write acknowledged after: %s\n", summary(acked))
	fmt.Printf("server sent N packets (the notifications) by: %s\n", summary(pktN))
	fmt.Printf("server sent 2N packets (and the reads' answers) by: %s\n", summary(pktAll))
	fmt.Printf("last session read the change by: %s\n", summary(lastAt))
	return nil
}

// connect opens a session and waits for it.
func connect(addr string) (*zk.Conn, error) {
	c, events, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogInfo(false), zk.WithMaxBufferSize(64<<10))
	if err != nil {
		return nil, err
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-timeout:
			c.Close()
			return nil, errors.New("no session within 20 s")
		}
	}
}

// packetsSent returns the server's zk_packets_sent (the `mntr` command).
func packetsSent(addr string) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write([]byte("mntr")); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "zk_packets_sent"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no zk_packets_sent in mntr (is mntr in 4lw.commands.whitelist?)", addr)
}

// cpu returns process pid's user and system time.
func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

// selfCPU returns this process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// summary prints p50, p99 and max.
func summary(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		return s[min(len(s)-1, int(p*float64(len(s))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d changes)", q(0.5), q(0.99), s[len(s)-1].Round(100*time.Microsecond), len(s))
}
