package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4/resp/resp3"
	"github.com/tidwall/redcon"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// A session is one client connection and its own upstream connection.
//
// Two goroutines: the reader parses the client's commands (reqReader),
// answers some from L1 and writes the others, unchanged, to the upstream; for
// each command it queues what the reply needs, in order. The writer takes the
// queue in order: a reply the proxy made is written as it is, any other is
// read from the upstream, one RESP message (radix's RawMessage: the exact
// bytes), and copied. So a pipeline keeps its order and the bytes are Redis'.
//
// Connection state the proxy must know (database, protocol, MULTI, WATCH, app
// name) is taken from the replies, by the writer. A command that may change
// it, and any write, raises a barrier: before answering a later command from
// L1 the reader waits until the writer has seen every reply up to it.
// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, MONITOR, CLIENT REPLY, CLIENT TRACKING
// and the replication commands turn the session into a plain pipe both ways
// for good.
//
// With shared upstream connections (Config.Upstream "shared") a session
// starts without a connection of its own: the reader appends each command
// to a connection of the shared pool (upstream.go) with its item, whose
// reply the pool hands over; the writer waits for it in turn. At the first
// command that needs a connection of its own (cmdInfo.needsOwn: state,
// blocking, Pub/Sub...) the reader waits until every command it sent on
// the shared connection is answered, dials one, and from then on the
// session is as above.
type session struct {
	p  *Proxy
	c  *counts  // the proxy's stripe of counts this session adds to
	cc net.Conn // client
	uc net.Conn // upstream; nil while on a shared connection (set by the reader, under mu)
	rd *reqReader
	uw *bufio.Writer // to upstream; the reader's; nil while on a shared connection
	ur *bufio.Reader // from upstream; the writer's (set by the reader before the first item that uses it)
	cw *bufio.Writer // to the client; the writer's
	q  *replyQueue

	// Shared upstream mode, while uw is nil.
	sh       *sharedConn   // the reader's: the shared connection the session's commands go to
	slot     int           // sh's slot in the pool
	inflight atomic.Int64  // commands sent on a shared connection, not answered yet
	shFailed atomic.Bool   // a shared connection failed under one of them: the session ends
	draining atomic.Bool   // the reader waits for inflight to reach 0
	drained  chan struct{} // cap 1: inflight reached 0 while draining
	stop     chan struct{} // closed when the writer must stop waiting (grace over, killed)
	stopOnce sync.Once

	mu      sync.Mutex
	cond    *sync.Cond
	sent    uint64 // barriers queued by the reader
	done    uint64 // barriers the writer has passed
	st      connState
	closing bool
	mem     int64 // bytes of the client's commands held: the reader's buffer and held
	held    int64 // of which queued items keep (item.own)

	multiWrites []string // keys written by commands queued in MULTI: dropped at EXEC

	// settle, in cluster mode, answers the commands sent and not answered
	// yet (clusterSession.answerBatch); settled calls it first.
	settle func() error

	graceTimer *time.Timer // shared mode, shutting down: ends the wait for replies; guarded by mu
}

// connState is what the replies have told of the connection.
type connState struct {
	db    int // -1: unknown (a SELECT inside MULTI)
	proto int
	multi bool
	watch bool
	app   *appClient
}

// item is one command's reply to come.
type item struct {
	local   []byte // a reply the proxy made; nil: read one from upstream
	kind    cmdKind
	args    [][]byte // the command, for state changes
	app     *appClient
	keys    [][]byte // keys to report
	value   bool     // GET: report the bytes of the value, not of the reply
	write   bool
	ticket  hotcache.ReplyTicket
	store   bool
	barrier bool
	pipe    bool  // switch to a plain pipe after this reply
	held    int64 // bytes of the client's that args and keys keep (own)
	// msgs, if not 0, is how many messages answer the command, push
	// messages included ((P|S)UNSUBSCRIBE); 0: one reply, push messages
	// before it passed on as they come.
	msgs int
	// argBytes is, for a write, the bytes of its arguments after the first
	// key (what a write reports).
	argBytes int

	// Sent on a shared upstream connection (upstream.go): the pool sets
	// reply or upErr, then ready, and wakes sess's writer.
	shared bool
	sess   *session
	reply  []byte
	upErr  error
	ready  atomic.Bool
}

// own copies the arguments and keys the item keeps out of the reader's
// buffer, which the next read reuses, and returns their size.
func (it *item) own() int {
	n := 0
	for _, a := range it.args {
		n += len(a)
	}
	for _, k := range it.keys {
		n += len(k)
	}
	if len(it.args) == 0 && len(it.keys) == 0 {
		return 0
	}
	buf := make([]byte, 0, n)
	clone := func(in [][]byte) [][]byte {
		out := make([][]byte, len(in))
		for i, a := range in {
			start := len(buf)
			buf = append(buf, a...)
			out[i] = buf[start:len(buf):len(buf)]
		}
		return out
	}
	it.args, it.keys = clone(it.args), clone(it.keys)
	return n
}

// newSession makes the session of client connection cc: with its own
// upstream connection uc, or, uc nil, on the shared connection sh of the
// pool's slot.
func newSession(p *Proxy, cc, uc net.Conn, sh *sharedConn, slot int, app *appClient) *session {
	s := &session{p: p, c: p.stats.stripe(), cc: cc, cw: bufio.NewWriterSize(cc, 32<<10), q: newReplyQueue(),
		sh: sh, slot: slot, stop: make(chan struct{})}
	if uc != nil {
		s.setUpstream(uc)
	} else {
		s.drained = make(chan struct{}, 1)
	}
	s.rd = newReqReader(cc, s.grow, s.shrink)
	s.cond = sync.NewCond(&s.mu)
	s.st = connState{db: 0, proto: 2, app: app}
	return s
}

// setUpstream gives the session its own upstream connection.
func (s *session) setUpstream(uc net.Conn) {
	s.mu.Lock()
	s.uc = uc
	s.mu.Unlock()
	s.uw, s.ur = bufio.NewWriterSize(uc, 32<<10), bufio.NewReaderSize(uc, 64<<10)
}

// upstream is the session's own upstream connection, nil if it has none.
func (s *session) upstream() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uc
}

// run serves the session until either side closes.
func (s *session) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.writer()
	}()
	s.reader()
	<-done
	s.cc.Close()
	s.mu.Lock()
	if s.uc != nil {
		s.uc.Close()
	}
	if s.graceTimer != nil {
		s.graceTimer.Stop()
	}
	s.mu.Unlock()
}

// shutdown stops reading the client's commands; the replies of those already
// sent are still written, within grace.
func (s *session) shutdown(grace time.Duration) {
	s.mu.Lock()
	s.closing = true
	uc := s.uc
	if s.drained != nil { // began on a shared connection: its replies come to the writer, which the timer stops waiting
		s.graceTimer = time.AfterFunc(grace, s.expire)
	}
	s.mu.Unlock()
	_ = s.cc.SetReadDeadline(time.Now())
	if uc != nil {
		_ = uc.SetReadDeadline(time.Now().Add(grace))
	}
}

// expire ends the writer's wait for replies: the grace is over.
func (s *session) expire() {
	s.stopOnce.Do(func() { close(s.stop) })
	if uc := s.upstream(); uc != nil {
		_ = uc.SetReadDeadline(time.Now())
	}
}

// kill closes both connections: the session's goroutines end.
func (s *session) kill() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.cc.Close()
	if uc := s.upstream(); uc != nil {
		uc.Close()
	}
}

// grow reserves n bytes more for the client's commands, within its bound
// and the proxy's. While queued commands keep bytes it waits for their
// replies to give them back; false refuses (the client is closed).
func (s *session) grow(n int) bool {
	p := s.p
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.mem+int64(n) <= p.cfg.MaxClientBuffer && p.mem.take(int64(n)) {
			s.mem += int64(n)
			return true
		}
		if s.held == 0 || s.closing {
			return false
		}
		held := s.held
		s.mu.Unlock()
		err := s.flushUp() // the replies waited for may belong to commands in the buffer
		s.mu.Lock()
		if err != nil {
			return false
		}
		for s.held >= held && !s.closing {
			s.cond.Wait()
		}
	}
}

// shrink gives n bytes back.
func (s *session) shrink(n int) {
	s.mu.Lock()
	s.mem -= int64(n)
	s.mu.Unlock()
	s.p.mem.give(int64(n))
}

// done gives back what a queued item kept.
func (s *session) doneWith(it *item) {
	if it.held == 0 {
		return
	}
	s.mu.Lock()
	s.mem -= it.held
	s.held -= it.held
	s.cond.Broadcast()
	s.mu.Unlock()
	s.p.mem.give(it.held)
}

// readErr answers the error that ended the client's commands, after the
// replies of those before it: Redis answers a protocol error and closes.
func (s *session) readErr(err error) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing { // shutting down: the error is the proxy's
		return
	}
	var pe *protoError
	switch {
	case errors.As(err, &pe):
		s.q.push(&item{local: pe.reply()}, s.flushUp)
	case errors.Is(err, errOverBudget):
		s.p.mem.refused.Add(1)
		s.q.push(&item{local: overBudgetReply}, s.flushUp)
	}
}

func (s *session) reader() {
	defer s.q.close()
	defer s.rd.close()
	pipe := false
	for {
		cmds, err := s.rd.ReadCommands()
		if err != nil {
			if !pipe {
				s.readErr(err)
			}
			_ = s.flushUp()
			s.closeUpstreamWrite()
			return
		}
		for _, cmd := range cmds {
			if pipe {
				if _, err := s.uw.Write(cmd.Raw); err != nil {
					return
				}
				continue
			}
			in := s.p.cmds.get().classify(cmd.Args)
			if s.uw == nil && in.needsOwn(cmd.Args) && !s.ownUpstream() {
				return
			}
			it := s.handle(cmd, in)
			if n := it.own(); n > 0 {
				if !s.grow(n) {
					s.p.mem.refused.Add(1)
					s.q.push(&item{local: overBudgetReply}, s.flushUp)
					_ = s.flushUp()
					s.closeUpstreamWrite()
					return
				}
				it.held = int64(n)
				s.mu.Lock()
				s.held += it.held
				s.mu.Unlock()
			}
			switch {
			case it.local != nil:
			case s.uw != nil:
				if _, err := s.uw.Write(cmd.Raw); err != nil {
					s.doneWith(it) // not queued: what it keeps goes back now
					return
				}
			case it.kind == kindQuit: // not to a shared connection: answered as Redis answers it
				it.local = okReply
			case !s.sendShared(cmd.Raw, it):
				s.doneWith(it)
				return
			}
			if it.barrier {
				s.mu.Lock()
				s.sent++
				s.mu.Unlock()
			}
			// The writer is behind when the queue is full: the reader
			// first sends the commands it waits for.
			if !s.q.push(it, s.flushUp) {
				s.doneWith(it) // not queued: what it keeps goes back now
				return
			}
			if it.pipe {
				pipe = true
			}
			if it.kind == kindQuit { // Redis runs nothing after it, answers it and closes
				_ = s.flushUp()
				s.closeUpstreamWrite()
				return
			}
		}
		if err := s.flushUp(); err != nil {
			return
		}
	}
}

var okReply = []byte("+OK\r\n")

// flushUp sends what the reader has written: to the session's own upstream
// connection, or, on a shared one, has the pool's writer write it.
func (s *session) flushUp() error {
	if s.uw != nil {
		return s.uw.Flush()
	}
	if s.sh != nil {
		s.sh.flush()
	}
	return nil
}

func (s *session) closeUpstreamWrite() {
	if tc, ok := s.upstream().(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}

// sendShared appends a forwarded command to the session's shared
// connection. If that connection has failed, the session moves to the
// slot's next one once its commands on it are all answered, unless one of
// them failed. false ends the session: a command of its failed (the writer
// closes the client there), or no connection can be dialled (the client is
// told Redis is unavailable, as when it connects then).
func (s *session) sendShared(raw []byte, it *item) bool {
	it.sess, it.shared = s, true
	for {
		s.inflight.Add(1)
		if s.sh.send(raw, it) {
			return true
		}
		s.inflight.Add(-1)
		if !s.drain() || s.shFailed.Load() {
			return false
		}
		c, err := s.p.shared.conn(s.slot)
		if err != nil {
			s.p.log.Debug("hotspot-proxy: upstream", "err", err)
			s.q.push(&item{local: errUnavailable}, s.flushUp)
			return false
		}
		s.sh = c
	}
}

// drain flushes the shared connection and waits until every command the
// session sent on a shared connection is answered (or failed); false if
// the session must stop first.
func (s *session) drain() bool {
	if s.sh != nil {
		s.sh.flush()
	}
	s.draining.Store(true)
	defer s.draining.Store(false)
	for s.inflight.Load() > 0 {
		select {
		case <-s.drained:
		case <-s.stop:
			return false
		}
	}
	return true
}

// ownUpstream moves a session on a shared connection to an upstream
// connection of its own, for the rest of its life. It first waits until
// every command the session sent on the shared connection is answered, so
// that Redis runs them before the commands that follow on the new one.
// false ends the session: a shared command failed, the session is
// stopping, or Redis cannot be dialled (the client is told so).
func (s *session) ownUpstream() bool {
	if !s.drain() || s.shFailed.Load() {
		return false
	}
	uc, err := s.p.dialUpstream()
	if err != nil {
		s.p.log.Debug("hotspot-proxy: upstream", "err", err)
		s.q.push(&item{local: errUnavailable}, s.flushUp)
		return false
	}
	s.setUpstream(uc)
	s.sh = nil
	s.p.stats.owned.Add(1)
	return true
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// settled waits until the writer has passed every barrier queued so far (in
// cluster mode: answers the batch) and returns the connection's state then;
// ok is false when the session is closing or has failed.
func (s *session) settled() (connState, bool) {
	ended := s.settle != nil && s.settle() != nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if ended {
		return s.st, false
	}
	if s.done < s.sent {
		// The replies waited for may belong to commands still in the buffer.
		s.mu.Unlock()
		err := s.flushUp()
		s.mu.Lock()
		if err != nil {
			return s.st, false
		}
	}
	for s.done < s.sent && !s.closing {
		s.cond.Wait()
	}
	return s.st, !s.closing
}

// handle decides what to do with one command, of the table's entry in: an
// item whose local reply is set is answered by the proxy, any other is
// forwarded.
func (s *session) handle(cmd command, in *cmdInfo) *item {
	p := s.p
	args := cmd.Args
	s.mu.Lock()
	it := &item{app: s.st.app}
	s.mu.Unlock()
	if in.kind == kindHotspot {
		st, _ := s.settled()
		it.local = p.hotspotCommand(st.app, args)
		return it
	}
	it.kind, it.barrier, it.pipe = in.kind, in.barrier, in.pipe
	if in.kind == kindUnsubscribe {
		// Outside pipe mode the connection has no subscription: Redis
		// answers one message per channel named, or one for none.
		it.msgs = max(1, len(args)-1)
	}
	if in.barrier || in.pipe {
		if in.kind != kindPlain && in.kind != kindAuth {
			it.args = args // the state its reply changes (SELECT's database...)
		}
		s.c.passthrough.Add(1)
		return it
	}
	if !in.redis { // not in Redis' COMMAND table, or it is not read yet
		s.c.passthrough.Add(1)
		return it
	}
	it.keys = in.keys(nil, args)
	it.write = in.write
	if in.write {
		it.barrier = true // read-your-writes: no L1 answer before its reply is in
		for _, a := range args[min(2, len(args)):] {
			it.argBytes += len(a)
		}
	}
	if len(it.keys) > 0 && in.kind == kindGet && len(args) == 2 {
		it.value = true
		return s.get(it, args)
	}
	if in.kind == kindMGet && len(args) > 1 {
		return s.mget(it, args)
	}
	if in.cacheable && len(args) >= 2 {
		return s.cached(it, args)
	}
	s.c.passthrough.Add(1)
	return it
}

// eligible reports whether this session may be answered from L1 now, once
// every state change sent before is known, and sets it.app to the app then.
func (s *session) eligible(it *item) (connState, bool) {
	st, ok := s.settled()
	it.app = st.app
	if !ok || st.app == nil || st.db != 0 || st.multi || st.watch {
		return st, false
	}
	return st, true
}

func (s *session) get(it *item, args [][]byte) *item {
	p := s.p
	if !it.app.c.IsHot(string(args[1])) {
		s.c.passthrough.Add(1)
		return it
	}
	st, ok := s.eligible(it)
	if !ok || !st.app.c.IsHot(string(args[1])) {
		s.c.passthrough.Add(1)
		return it
	}
	app := st.app
	// No deadline of our own: a miss waits for the SDK's single-flight load,
	// which its op timeout bounds, and a hit must not pay for a timer.
	v, hs, _ := app.c.LookupHot(context.Background(), string(args[1]))
	switch hs {
	case hotcache.HotHit, hotcache.HotMiss:
		if v != nil || hs == hotcache.HotHit {
			s.c.count(hs)
			it.local = appendBulk(nil, v)
			it.keys = nil // counted by LookupHot
			return it
		}
	case hotcache.HotLimited:
		s.c.limited.Add(1)
		it.local = p.blank(st.proto)
		it.keys = nil
		return it
	}
	// Not found in L1 (a missing key or another type), or a failed read: the
	// reply cache, which reads on this connection.
	return s.cachedFor(it, args, st)
}

func (s *session) cached(it *item, args [][]byte) *item {
	if !it.app.c.IsHot(string(args[1])) {
		s.c.passthrough.Add(1)
		return it
	}
	st, ok := s.eligible(it)
	if !ok {
		s.c.passthrough.Add(1)
		return it
	}
	return s.cachedFor(it, args, st)
}

func (s *session) cachedFor(it *item, args [][]byte, st connState) *item {
	p := s.p
	rc := st.app.replies
	data, tk, hs := rc.Get(string(args[1]), variant(st.proto, args))
	switch hs {
	case hotcache.HotHit:
		s.c.hits.Add(1)
		it.local = data
		it.keys = nil
	case hotcache.HotLimited:
		s.c.limited.Add(1)
		it.local = p.blank(st.proto)
		it.keys = nil
	case hotcache.HotMiss:
		s.c.misses.Add(1)
		it.ticket, it.store = tk, true
		it.keys = nil // Put counts it
	default:
		s.c.passthrough.Add(1)
	}
	return it
}

// mget answers MGET from L1 when every key is hot and has a value there.
func (s *session) mget(it *item, args [][]byte) *item {
	p := s.p
	for _, k := range args[1:] {
		if !it.app.c.IsHot(string(k)) {
			s.c.passthrough.Add(1)
			return it
		}
	}
	st, ok := s.eligible(it)
	if !ok {
		s.c.passthrough.Add(1)
		return it
	}
	app := st.app
	out := redcon.AppendArray(nil, len(args)-1)
	for i, k := range args[1:] {
		v, hs, _ := app.c.LookupHot(context.Background(), string(k)) // as in get
		switch {
		case hs == hotcache.HotLimited:
			s.c.limited.Add(1)
			out = append(out, p.null(st.proto)...)
		case (hs == hotcache.HotHit || hs == hotcache.HotMiss) && v != nil:
			s.c.count(hs)
			out = appendBulk(out, v)
		default:
			// Not in L1 after all: forward, reporting only the keys not
			// counted yet.
			it.keys = args[1+i:]
			s.c.passthrough.Add(1)
			return it
		}
	}
	it.local = out
	it.keys = nil
	return it
}

// variant names a reply: protocol, then every argument, length-prefixed.
func variant(proto int, args [][]byte) string {
	n := 1
	for _, a := range args {
		n += len(a) + binary.MaxVarintLen32
	}
	b := make([]byte, 0, n)
	b = append(b, byte(proto))
	for i, a := range args {
		b = binary.AppendUvarint(b, uint64(len(a)))
		if i == 0 {
			b = append(b, bytes.ToLower(a)...)
			continue
		}
		b = append(b, a...)
	}
	return string(b)
}

func appendBulk(b, v []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, '\r', '\n')
	b = append(b, v...)
	return append(b, '\r', '\n')
}

// writer writes the replies in order and applies what they say.
func (s *session) writer() {
	defer s.release()
	var rm resp3.RawMessage
	for {
		// Before it sleeps, what is written goes out.
		it := s.q.next(s.stop, s.cw.Flush)
		if it == nil {
			return
		}
		ok := s.write(it, &rm)
		s.doneWith(it)
		if !ok {
			return
		}
	}
}

// readMsg reads one message from upstream; the replies written before it
// go out first if it is not there yet (the next may take long: BLPOP).
func (s *session) readMsg(rm *resp3.RawMessage) error {
	if s.ur.Buffered() == 0 {
		if err := s.cw.Flush(); err != nil {
			return err
		}
	}
	return rm.UnmarshalRESP(s.ur, p3opts.o)
}

// write writes an item's reply and applies it; false ends the session (the
// writer stops; a pipe has ended).
func (s *session) write(it *item, rm *resp3.RawMessage) bool {
	switch {
	case it.local != nil:
		if _, err := s.cw.Write(it.local); err != nil {
			return false
		}
		s.pass(it, nil)
	case it.shared: // answered (replyQueue.next)
		if it.upErr != nil {
			return false
		}
		if _, err := s.cw.Write(it.reply); err != nil {
			return false
		}
		s.after(it, it.reply)
		it.reply = nil
	case it.pipe:
		// Everything before it has been answered: what comes next from
		// upstream is its replies and whatever follows them (messages,
		// MONITOR lines, RESP3 pushes).
		if s.cw.Flush() != nil {
			return false
		}
		s.pipe()
		return false
	case it.msgs > 0:
		for range it.msgs {
			if err := s.readMsg(rm); err != nil {
				return false
			}
			if _, err := s.cw.Write(*rm); err != nil {
				return false
			}
		}
		s.after(it, *rm)
	default:
		if err := s.readReply(rm, p3opts); err != nil {
			return false
		}
		if _, err := s.cw.Write(*rm); err != nil {
			return false
		}
		s.after(it, *rm)
	}
	return true
}

// readReply reads one reply from upstream into rm: a push message before it
// (RESP3, e.g. client tracking in the same connection) is copied to the
// client as it comes; an attribute is kept with the reply it annotates.
func (s *session) readReply(rm *resp3.RawMessage, opts *respOpts) error {
	for {
		if err := s.readMsg(rm); err != nil {
			return err
		}
		switch (*rm)[0] {
		case '>':
			if _, err := s.cw.Write(*rm); err != nil {
				return err
			}
			continue
		case '|':
			var next resp3.RawMessage
			if err := s.readReply(&next, opts); err != nil {
				return err
			}
			*rm = append(*rm, next...)
		}
		return nil
	}
}

// pipe copies upstream to the client until either closes; the reader goes on
// forwarding the client's commands unchanged.
func (s *session) pipe() {
	_, _ = io.Copy(s.cc, s.ur)
	s.cc.Close()
}

// release wakes a reader waiting on a barrier and drains the queue when the
// writer stops early (upstream gone): the client then sees its connection
// closed.
func (s *session) release() {
	_ = s.cw.Flush() // the replies read before upstream closed (after QUIT, say)
	// A reader waiting for the replies of its shared commands (drain) stops.
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Lock()
	s.closing = true
	s.cond.Broadcast()
	uc := s.uc
	s.mu.Unlock()
	s.cc.Close()
	if uc != nil {
		uc.Close()
	}
	for _, it := range s.q.stop() { // the reader's pushes are refused from now on
		s.doneWith(it)
	}
}

// pass marks an item's barrier passed.
func (s *session) pass(it *item, _ []byte) {
	if !it.barrier {
		return
	}
	s.mu.Lock()
	s.done++
	s.cond.Broadcast()
	s.mu.Unlock()
}

// after applies a forwarded command's reply: state, cache, reports and
// invalidations.
func (s *session) after(it *item, reply []byte) {
	isErr := len(reply) > 0 && (reply[0] == '-' || reply[0] == '!')
	s.mu.Lock()
	st := &s.st
	inMulti := st.multi
	var execWrites []string
	switch it.kind {
	case kindSelect:
		if !isErr && len(it.args) == 2 {
			if st.multi {
				st.db = -1 // applies at EXEC, if it does
			} else if n, err := strconv.Atoi(string(it.args[1])); err == nil {
				st.db = n
			}
		}
	case kindHello:
		if !isErr && len(it.args) >= 2 {
			if n, err := strconv.Atoi(string(it.args[1])); err == nil {
				st.proto = n
			}
		}
	case kindMulti:
		if !isErr {
			st.multi = true
		}
	case kindExec:
		st.multi, st.watch = false, false
		execWrites, s.multiWrites = s.multiWrites, nil
	case kindWatch:
		if !isErr && !st.multi {
			st.watch = true
		}
	case kindUnwatch:
		if !isErr && !st.multi {
			st.watch = false
		}
	case kindReset:
		if !isErr {
			*st = connState{db: 0, proto: 2, app: s.p.defaultApp}
			s.multiWrites = nil
		}
	case kindSetName:
		if !isErr {
			if name, ok := bytes.CutPrefix(it.args[2], []byte("app:")); ok && len(name) > 0 {
				if a := s.p.appFor(string(name)); a != nil {
					st.app = a // the reader takes it after the barrier
				}
			}
		}
	}
	if inMulti && it.write && !isErr {
		for _, k := range it.keys {
			s.multiWrites = append(s.multiWrites, string(k))
		}
	}
	s.mu.Unlock()
	app := it.app
	if app != nil {
		if it.store {
			if !isErr || bytes.HasPrefix(reply, []byte("-WRONGTYPE")) {
				app.replies.Put(it.ticket, reply)
			} else {
				app.c.ReportRead(it.ticket.Key(), 0)
			}
		}
		if len(it.keys) > 0 {
			s.report(app, it, reply, isErr || inMulti)
		}
		for _, k := range execWrites {
			s.invalidate(app, k)
		}
	}
	s.pass(it, reply)
}

// report counts the command's keys and, for a write that took effect (not
// one queued in MULTI: EXEC does that), drops hot ones in every instance's
// L1. A write counts the bytes of its arguments after the first key.
func (s *session) report(app *appClient, it *item, reply []byte, noInvalidate bool) {
	if it.write {
		for _, k := range it.keys {
			key := string(k)
			app.c.ReportWrite(key, it.argBytes)
			if !noInvalidate {
				s.invalidate(app, key)
			}
		}
		return
	}
	per := len(reply) / len(it.keys)
	if it.value {
		per = bulkLen(reply)
	}
	for _, k := range it.keys {
		app.c.ReportRead(string(k), per)
	}
}

// bulkLen is the length of the bulk string that reply is, and 0 for any
// other reply (a null, an error).
func bulkLen(reply []byte) int {
	if _, r := redcon.ReadNextRESP(reply); r.Type == redcon.Bulk {
		return len(r.Data)
	}
	return 0
}

// invalidate drops a hot key written through this session here at once (a
// later read on any connection then misses) and broadcasts it to every
// instance, without deleting it in Redis. On a Redis Cluster a hot key is
// read from copies on other masters, which still hold the old value: there
// the broadcast, which deletes them before it drops the key here, is made
// before the session goes on, so that no read that follows the write
// reloads the old value from a copy.
func (s *session) invalidate(app *appClient, key string) {
	if !app.c.IsHot(key) {
		return
	}
	if s.p.cluster != nil {
		s.p.broadcastNow(app, key)
		return
	}
	app.c.DropLocal(key)
	s.p.broadcast(app, key)
}

// eqFold reports whether b is s (lowercase ASCII) in any case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
