package proxy

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4/resp/resp3"
)

// sharedPool is the shared upstream connections (Config.Upstream "shared")
// to one Redis server, or in cluster mode to one master:
// Config.UpstreamConns slots, each holding one connection that carries the
// commands of many sessions, pipelined.
//
// A session is bound to one slot for its life (until it needs a connection
// of its own, cmdInfo.needsOwn). It appends each command it forwards, with
// the item that waits for the reply, to the slot's connection
// (sharedConn.send): the bytes and the item in the same order, under one
// lock, so the n-th reply read is the n-th item's. Whatever the sessions
// have appended is written at once, in one write (that is the pipelining):
// by the session that flushes when no write is in progress, else by the
// connection's writer goroutine once the write in progress is done (flush).
// Another goroutine reads the replies and hands each to its item, never
// blocking on a session. A connection that fails (a write or read
// error, Redis closed it) fails every item not answered yet, and their
// sessions close their clients; the slot dials a new connection at its next
// use, where a session whose commands were all answered goes on.
//
// The invariant: a reply is handed only to the item whose command preceded
// it on the same connection; an item of a failed connection gets an error,
// never a reply.
type sharedPool struct {
	dial  func() (net.Conn, error) // a new connection to the Redis server (single mode) or master (cluster mode)
	slots []sharedSlot
	next  atomic.Uint32 // the slot of the next session
	up    atomic.Int64  // when a slot last dialled Redis, Unix ns

	mu     sync.Mutex     // guards closed and wg.Add
	closed bool           // close has run: no connection is dialled any more
	wg     sync.WaitGroup // every connection's goroutines
}

type sharedSlot struct {
	mu      sync.Mutex // guards the fields; held while dialling
	cur     *sharedConn
	lastErr error     // the last dial's error, if it failed
	errAt   time.Time // when
}

// redialAfter is how long after a failed dial a slot answers with its error
// instead of dialling again: the sessions waiting on a Redis that does not
// answer are not each held for a dial timeout in turn. A dial that works on
// any slot ends the wait on every slot: Redis is back.
const redialAfter = 250 * time.Millisecond

var errPoolClosed = errors.New("shared upstream pool closed")

func newSharedPool(n int, dial func() (net.Conn, error)) *sharedPool {
	return &sharedPool{dial: dial, slots: make([]sharedSlot, n)}
}

// pick returns the slot of a new session: round robin.
func (sp *sharedPool) pick() int { return int(sp.next.Add(1) % uint32(len(sp.slots))) }

// conn returns slot i's connection, dialling a new one if it has none or it
// has failed.
func (sp *sharedPool) conn(i int) (*sharedConn, error) {
	sl := &sp.slots[i]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if c := sl.cur; c != nil && !c.hasFailed() {
		return c, nil
	}
	if sl.lastErr != nil && time.Since(sl.errAt) < redialAfter && sp.up.Load() < sl.errAt.UnixNano() {
		return nil, sl.lastErr
	}
	nc, err := sp.dial()
	if err != nil {
		sl.lastErr, sl.errAt = err, time.Now()
		return nil, err
	}
	sl.lastErr = nil
	sp.up.Store(time.Now().UnixNano())
	c := &sharedConn{nc: nc, wake: make(chan struct{}, 1), dead: make(chan struct{})}
	c.space = sync.NewCond(&c.mu)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		nc.Close()
		return nil, errPoolClosed
	}
	sp.wg.Go(c.writeLoop)
	sp.wg.Go(c.readLoop)
	sl.cur = c
	return c, nil
}

// close closes every connection and waits for their goroutines; the items
// not answered fail. Serve calls it once the sessions have ended.
func (sp *sharedPool) close() {
	sp.mu.Lock()
	sp.closed = true
	sp.mu.Unlock()
	for i := range sp.slots {
		sl := &sp.slots[i]
		sl.mu.Lock()
		if sl.cur != nil {
			sl.cur.fail()
		}
		sl.mu.Unlock()
	}
	sp.wg.Wait()
}

// sharedConn is one shared upstream connection.
type sharedConn struct {
	nc   net.Conn
	wake chan struct{} // cap 1: out has commands to write
	dead chan struct{} // closed once it failed: the writer stops

	mu      sync.Mutex // guards out, spare, writing, calls and failed
	space   *sync.Cond // out has room again, or the connection failed
	out     []byte     // commands appended and not written yet
	spare   []byte     // the buffer of the last write, for the next out
	writing bool       // a goroutine is writing: the others leave out to it
	calls   []*item    // the items of the commands appended whose replies the reader has not taken, in order
	failed  bool
}

// maxPending bounds the bytes of commands appended and not written yet: a
// session appending past it waits for the writer (a single bigger command
// is taken when out is empty).
const maxPending = 8 << 20

// send appends a command and the item its reply goes to; false if the
// connection has failed. The command is written at the next flush (by this
// session or any other).
func (c *sharedConn) send(raw []byte, it *item) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.out) > 0 && len(c.out)+len(raw) > maxPending && !c.failed {
		c.wakeWriter()
		c.space.Wait()
	}
	if c.failed {
		return false
	}
	c.out = append(c.out, raw...)
	c.calls = append(c.calls, it)
	return true
}

// flush writes what has been appended, on the caller's goroutine, unless a
// write is in progress: the goroutine writing then writes it next (or has
// the writer do it). A command costs no hand-over to another goroutine on
// its way to Redis when the connection is not busy.
func (c *sharedConn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing || c.failed || len(c.out) == 0 {
		return
	}
	if !c.write() {
		return
	}
	if len(c.out) > 0 {
		// Appended while this session wrote: the writer takes it, so
		// that a session does not write for the others for long.
		c.wakeWriter()
	}
}

// write writes out, in one write, with c.mu held, which it releases while
// writing; false if the write failed (the connection then fails).
func (c *sharedConn) write() bool {
	buf := c.out
	c.out, c.spare = c.spare[:0], nil
	c.writing = true
	c.space.Broadcast()
	c.mu.Unlock()
	_, err := c.nc.Write(buf)
	if err != nil {
		c.failWrite()
	}
	c.mu.Lock()
	c.writing = false
	if cap(buf) <= 1<<20 { // a big command passed: don't keep its room
		c.spare = buf[:0]
	}
	return err == nil
}

// wakeWriter has the writer goroutine write what has been appended.
func (c *sharedConn) wakeWriter() { signal(c.wake) }

func (c *sharedConn) hasFailed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// fail marks the connection failed and closes it: the reader's read ends,
// and it fails the items left.
func (c *sharedConn) fail() {
	c.markFailed()
	c.nc.Close()
}

// failWrite is fail after a write failed (Redis closed the connection, say):
// the replies Redis sent before are still read, a second at most, so the
// commands it answered are answered; the reader then fails the others.
// Closing at once would drop them unread.
func (c *sharedConn) failWrite() {
	c.markFailed()
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
}

// markFailed takes no command any more and stops the writer.
func (c *sharedConn) markFailed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.failed {
		c.failed = true
		c.out = nil
		close(c.dead)
		c.space.Broadcast()
	}
}

// writeLoop writes what the sessions have appended and left to it (see
// flush), all of it in one write, until the connection fails.
func (c *sharedConn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.dead:
			return
		}
		c.mu.Lock()
		// A session writing now leaves what follows to this loop, and
		// wakes it when done.
		for !c.writing && !c.failed && len(c.out) > 0 {
			if !c.write() {
				break
			}
		}
		c.mu.Unlock()
	}
}

// readLoop reads the replies, in order, and hands each to the item whose
// command came first among those not answered; once the connection fails
// it fails the items left.
func (c *sharedConn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var batch []*item // taken from calls; batch[i:] wait for their replies
	i := 0
	err := func() error {
		for {
			var msg resp3.RawMessage // the item keeps it: a new one each time
			if err := msg.UnmarshalRESP(br, p3opts.o); err != nil {
				return err
			}
			if i == len(batch) {
				clear(batch)
				c.mu.Lock()
				batch, c.calls = c.calls, batch[:0]
				c.mu.Unlock()
				i = 0
				if len(batch) == 0 {
					return errors.New("a reply to no command")
				}
			}
			it := batch[i]
			for n := it.msgs; n > 1; n-- { // (P|S)UNSUBSCRIBE: a message per channel
				var more resp3.RawMessage
				if err := more.UnmarshalRESP(br, p3opts.o); err != nil {
					return err
				}
				msg = append(msg, more...)
			}
			i++
			it.answer(msg, nil)
		}
	}()
	c.fail()
	c.mu.Lock()
	rest := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, it := range batch[i:] {
		it.answer(nil, err)
	}
	for _, it := range rest {
		it.answer(nil, err)
	}
}

// answer hands a shared connection's reply (or its failure) to the item and
// wakes its session's writer; it never blocks.
func (it *item) answer(reply []byte, err error) {
	s := it.sess
	it.reply, it.upErr = reply, err
	if err != nil {
		s.shFailed.Store(true) // before inflight drops: sendShared reads them in the other order
	}
	it.ready.Store(true)
	if s.inflight.Add(-1) == 0 && s.draining.Load() {
		signal(s.drained)
	}
	signal(s.q.wake)
}

// signal sends on a channel of capacity 1 unless it is full.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
