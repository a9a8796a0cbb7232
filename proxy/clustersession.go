package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4/resp/resp3"
)

// A clusterSession is one client connection in cluster mode.
//
// One goroutine reads the client's commands and serves them in order. A
// plain command (any that does not change the connection's state, open or
// end a transaction, block or subscribe) is written to the master of its
// keys' slot (keyless commands to the session's home master) and left
// unanswered in the batch; the batch is answered in order, each reply read
// from its master's connection, once a command needs the replies before it
// (anything else, or an answer from L1), and at the end of what the client
// sent. So a pipeline costs one round trip per master, not per command. A
// MOVED or ASK in a batch is followed once every reply of the batch is in
// (at most maxRedirects), so that the command sent again finds its node's
// connection with nothing else to answer.
//
// The single-mode session's bookkeeping is reused as is: handle() decides
// what L1 answers and what is forwarded, after() applies a reply (state,
// reply cache, reports, invalidations). handle() answers from L1 only once
// the connection's state is settled: in cluster mode that answers the batch
// first (session.settle), so a read sees the writes sent before it.
//
// Upstream connections are dialled per master when first needed; the
// connection-state commands the client sent (AUTH, HELLO, CLIENT SETNAME,
// CLIENT SETINFO, READONLY) are replayed on each before its first command.
// With shared upstream connections (Config.Upstream "shared") the batch's
// commands go to the master's shared connection the session is bound to
// (sharedPool, as in single mode) until the first command that needs a
// connection of its own (cmdInfo.needsOwn): the batch is answered, and from
// then on the session dials its own, as above. Whatever a session sends
// outside the batch (a redirection followed, a transaction, a CLUSTER
// subcommand, UNSUBSCRIBE) goes on a connection of its own in both modes.
//
// A transaction runs on one master: WATCH pins it to its keys' master;
// without WATCH, MULTI is answered +OK by the proxy and sent, with any
// keyless command queued after it, before the first keyed command, to that
// key's master (or, for a transaction without keys, at EXEC, to home).
type clusterSession struct {
	*session
	m    *clusterMap
	home string

	umu     sync.Mutex
	ups     map[string]*upConn
	closing bool

	state []stateCmd // replayed on each new upstream connection, in order
	rm    resp3.RawMessage
	keys  [][]byte

	batch  []sentCmd // sent and not answered yet, in order
	failed error     // an upstream failed while the batch was answered: the session ends

	own    bool                   // the batch goes on connections of its own (always without shared connections)
	sh     map[string]*sharedConn // !own: the shared connection the session is bound to, per master
	shSlot map[string]int         // and its slot in the master's pool
	dead   chan struct{}          // closed by kill: stop waiting for a shared connection's reply
	kill1  sync.Once

	watchNode string        // master of the WATCHed keys
	pin       string        // master the open transaction runs on
	held      bool          // MULTI answered by the proxy, not sent yet
	queued    [][]byte      // keyless commands queued while held
	aborted   bool          // the held transaction failed: EXEC answers EXECABORT
	pipeUp    *upConn       // pipe mode: every command goes here unchanged
	piped     chan struct{} // pipe mode: closed when the copy from pipeUp ends
}

type upConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

type stateCmd struct {
	kind string
	raw  []byte
}

// sentCmd is a command of the batch: sent to u, or to the shared
// connection sh, its reply not read yet. raw and the item's arguments point
// into the reader's buffer, which the batch is answered before reading
// again.
type sentCmd struct {
	it   *item
	u    *upConn
	sh   *sharedConn
	raw  []byte
	slot int
}

const (
	maxRedirects = 5
	maxBatch     = 256 // commands sent before their replies are read
)

var (
	errCrossSlot   = []byte("-CROSSSLOT Keys in request don't hash to the same slot\r\n")
	errUnavailable = []byte("-ERR hotspot-proxy: Redis unavailable\r\n")
	errFatal       = errors.New("upstream failed")
)

func (p *Proxy) handleClusterConn(cc net.Conn) {
	s := &session{p: p, c: p.stats.stripe(), cc: cc, cw: bufio.NewWriterSize(cc, 32<<10)}
	s.rd = newReqReader(cc, s.grow, s.shrink) // nothing is held: the batch is answered before the next read
	s.cond = sync.NewCond(&s.mu)
	s.st = connState{db: 0, proto: 2, app: p.defaultApp}
	cs := &clusterSession{session: s, m: p.cluster, home: p.cluster.home(), ups: map[string]*upConn{},
		own: p.cluster.conns == 0, dead: make(chan struct{})}
	if !cs.own {
		// Nothing is queued: item.answer wakes, through the queue's wake,
		// the reader waiting in replyOf.
		s.q = newReplyQueue()
		cs.sh, cs.shSlot = map[string]*sharedConn{}, map[string]int{}
	}
	s.settle = cs.answerBatch
	p.track(cs, func() { cc.Close() })
}

// shutdown stops reading commands; a command already sent has grace to be
// answered.
func (cs *clusterSession) shutdown(grace time.Duration) {
	cs.umu.Lock()
	cs.closing = true
	for _, u := range cs.ups {
		_ = u.c.SetReadDeadline(time.Now().Add(grace))
	}
	cs.umu.Unlock()
	cs.mu.Lock()
	cs.session.closing = true
	cs.mu.Unlock()
	_ = cs.cc.SetReadDeadline(time.Now())
}

// kill closes the client's connection and every upstream one: run ends.
func (cs *clusterSession) kill() {
	cs.kill1.Do(func() { close(cs.dead) })
	cs.umu.Lock()
	cs.closing = true
	for _, u := range cs.ups {
		u.c.Close()
	}
	cs.umu.Unlock()
	cs.cc.Close()
}

func (cs *clusterSession) run() {
	defer func() {
		cs.rd.close()
		cs.closeAll()
		if cs.piped != nil {
			<-cs.piped
		}
	}()
	for {
		cmds, err := cs.rd.ReadCommands()
		if err != nil {
			var pe *protoError
			switch {
			case cs.pipeUp != nil:
			case errors.As(err, &pe):
				_ = cs.reply(pe.reply())
			case errors.Is(err, errOverBudget):
				cs.p.mem.refused.Add(1)
				_ = cs.reply(overBudgetReply)
			}
			_ = cs.cw.Flush()
			return
		}
		for _, cmd := range cmds {
			if cs.pipeUp != nil {
				if _, err := cs.pipeUp.w.Write(cmd.Raw); err != nil {
					return
				}
				continue
			}
			if err := cs.command(cmd); err != nil {
				_ = cs.cw.Flush()
				return
			}
		}
		if cs.pipeUp != nil {
			if cs.pipeUp.w.Flush() != nil {
				return
			}
			continue
		}
		if cs.answerBatch() != nil || cs.cw.Flush() != nil {
			_ = cs.cw.Flush()
			return
		}
	}
}

func (cs *clusterSession) closeAll() {
	cs.closeUpstreams("")
	cs.cc.Close()
}

// closeUpstreams closes and forgets every upstream connection but the one
// to keep ("" for none).
func (cs *clusterSession) closeUpstreams(keep string) {
	cs.umu.Lock()
	defer cs.umu.Unlock()
	for a, u := range cs.ups {
		if a != keep {
			u.c.Close()
			delete(cs.ups, a)
		}
	}
}

// reply writes a reply to the client, after those of the batch.
func (cs *clusterSession) reply(b []byte) error {
	if err := cs.answerBatch(); err != nil {
		return err
	}
	_, err := cs.cw.Write(b)
	return err
}

// local answers a command handle() made an item for with a reply of the
// proxy's, applied as Redis' would be.
func (cs *clusterSession) local(it *item, b []byte) error {
	cs.after(it, b)
	return cs.reply(b)
}

// command serves one command; an error closes the client connection.
func (cs *clusterSession) command(cmd command) error {
	args := cmd.Args
	in := cs.p.cmds.get().classify(args)
	switch in.kind {
	case kindCluster:
		return cs.clusterCommand(cmd)
	case kindQuit:
		_ = cs.reply([]byte("+OK\r\n"))
		return io.EOF
	case kindAsking:
		return cs.reply([]byte("+OK\r\n"))
	}
	if !cs.own && in.needsOwn(args) {
		// Redis runs what went on the shared connections first.
		if err := cs.answerBatch(); err != nil {
			return err
		}
		cs.own = true
		cs.p.stats.owned.Add(1)
	}
	slot, ok := cs.slotOf(in, args)
	if !ok {
		return cs.reply(errCrossSlot)
	}
	it := cs.handle(cmd, in)
	if it.local != nil {
		err := cs.reply(it.local)
		cs.pass(it, nil)
		return err
	}
	if it.pipe {
		addr := cs.homeAddr()
		if slot >= 0 && in.name == "ssubscribe" {
			addr = cs.owner(slot)
		}
		return cs.startPipe(addr, cmd.Raw)
	}
	if done, err := cs.txCommand(it, in, cmd, slot); done {
		return err
	}
	addr := cs.homeAddr()
	if slot >= 0 {
		addr = cs.owner(slot)
	}
	if in.kind == kindUnsubscribe {
		return cs.unsubscribe(it, addr, cmd)
	}
	if in.blocking {
		// The replies before it go out while it blocks.
		if err := cs.answerBatch(); err != nil {
			return err
		}
		if err := cs.cw.Flush(); err != nil {
			return err
		}
		return cs.forwardReply(it, addr, cmd.Raw, slot)
	}
	return cs.send(it, addr, cmd.Raw, slot)
}

// unsubscribe forwards (P|S)UNSUBSCRIBE, outside pipe mode (no
// subscription), and passes on the messages that answer it: one per
// channel, or one without, push messages in RESP3.
func (cs *clusterSession) unsubscribe(it *item, addr string, cmd command) error {
	if err := cs.answerBatch(); err != nil {
		return err
	}
	u, err := cs.conn(addr)
	if errors.Is(err, errDial) {
		return cs.reply(errUnavailable)
	}
	if err != nil {
		return err
	}
	if _, err := u.w.Write(cmd.Raw); err != nil {
		return cs.broken(u)
	}
	if err := u.w.Flush(); err != nil {
		return cs.broken(u)
	}
	for range max(1, len(cmd.Args)-1) {
		if err := cs.rm.UnmarshalRESP(u.r, p3opts.o); err != nil {
			return cs.broken(u)
		}
		if _, err := cs.cw.Write(cs.rm); err != nil {
			return err
		}
	}
	cs.after(it, cs.rm)
	return nil
}

// clusterCommand answers the CLUSTER subcommands the proxy owns and forwards
// the others: to the master of the slot they concern, else home.
func (cs *clusterSession) clusterCommand(cmd command) error {
	if b, ok := cs.p.clusterReply(cmd.Args, cs.proto(), cs.cc.LocalAddr()); ok {
		return cs.reply(b)
	}
	cs.c.passthrough.Add(1)
	addr := cs.homeAddr()
	if slot := clusterSlotArg(cmd.Args); slot >= 0 {
		addr = cs.owner(slot)
	}
	return cs.forwardReply(&item{}, addr, cmd.Raw, -1)
}

// slotOf returns the slot of the command's keys (-1 for none); ok is false
// when they are in more than one (CROSSSLOT).
func (cs *clusterSession) slotOf(in *cmdInfo, args [][]byte) (slot int, ok bool) {
	slot = -1
	cs.keys = in.keys(cs.keys[:0], args)
	for _, k := range cs.keys {
		s := keySlot(k)
		if slot >= 0 && s != slot {
			return slot, false
		}
		slot = s
	}
	return slot, true
}

// txCommand serves the commands of transactions, WATCH and the connection's
// state; done is false for any other command, which it leaves alone.
func (cs *clusterSession) txCommand(it *item, in *cmdInfo, cmd command, slot int) (done bool, err error) {
	switch {
	case it.kind == kindReset:
		return true, cs.reset(it, cmd.Raw)
	case it.kind == kindMulti:
		return true, cs.multi(it, cmd.Raw)
	case it.kind == kindExec:
		return true, cs.exec(it, cmd.Raw)
	case cs.pin != "":
		return true, cs.inTx(it, cmd.Raw)
	case cs.held:
		if slot < 0 {
			cs.queued = append(cs.queued, slices.Clone(cmd.Raw))
			return true, cs.local(it, []byte("+QUEUED\r\n"))
		}
		return true, cs.firstInTx(it, cmd.Raw, slot)
	case it.kind == kindWatch:
		return true, cs.watch(it, cmd.Raw, slot)
	case it.kind == kindUnwatch:
		addr := cs.homeAddr()
		if cs.watchNode != "" {
			addr = cs.watchNode
		}
		cs.watchNode = ""
		return true, cs.forwardReply(it, addr, cmd.Raw, -1)
	case in.state && cs.own:
		// On a shared connection the state commands that need none of
		// their own (HELLO, HELLO 2, CLIENT SETINFO) run as plain ones.
		return true, cs.stateCommand(it, in, cmd)
	}
	return false, nil
}

// watch sends WATCH to its keys' master, which the session's transaction
// then runs on.
func (cs *clusterSession) watch(it *item, raw []byte, slot int) error {
	addr := cs.owner(max(slot, 0))
	if cs.watchNode != "" && addr != cs.watchNode {
		return cs.reply(errCrossSlot)
	}
	reply, node, err := cs.forward(addr, raw, slot)
	if err != nil {
		return err
	}
	if !isErrReply(reply) {
		cs.watchNode = node
	}
	return cs.answer(it, reply)
}

// send writes a plain command to addr, or appends it to addr's shared
// connection, and adds it to the batch. A node that cannot be dialled (or
// refuses the connection's state) is left to forward, which answers the
// batch first.
func (cs *clusterSession) send(it *item, addr string, raw []byte, slot int) error {
	if cs.failed != nil {
		return cs.failed
	}
	if len(cs.batch) >= maxBatch {
		if err := cs.answerBatch(); err != nil {
			return err
		}
	}
	if !cs.own {
		for fresh := range 2 { // a connection that failed since: once more on a new one
			sh := cs.shared(addr, fresh == 1)
			if sh == nil {
				break
			}
			it.sess, it.shared = cs.session, true
			cs.inflight.Add(1)
			if sh.send(raw, it) {
				cs.batch = append(cs.batch, sentCmd{it: it, sh: sh, raw: raw, slot: slot})
				return nil
			}
			cs.inflight.Add(-1)
		}
		return cs.forwardReply(it, addr, raw, slot)
	}
	u, err := cs.conn(addr)
	if err != nil {
		return cs.forwardReply(it, addr, raw, slot)
	}
	if _, err := u.w.Write(raw); err != nil {
		return cs.broken(u)
	}
	cs.batch = append(cs.batch, sentCmd{it: it, u: u, raw: raw, slot: slot})
	return nil
}

// answerBatch reads the replies of the batch, in order, and answers each. An
// error ends the session (the client's connection closes): it is kept, so
// that nothing else is answered after the replies that were lost.
func (cs *clusterSession) answerBatch() error {
	if cs.failed != nil || len(cs.batch) == 0 {
		return cs.failed
	}
	b := cs.batch
	cs.batch = nil // answering may reply or forward, which come back here
	if err := cs.answerAll(b); err != nil {
		cs.failed = err
		return err
	}
	clear(b)
	cs.batch = b[:0]
	return nil
}

func (cs *clusterSession) answerAll(b []sentCmd) error {
	for i, sc := range b {
		if i > 0 && sc.u == b[i-1].u && sc.sh == b[i-1].sh { // a connection's commands are mostly together
			continue
		}
		if sc.sh != nil {
			sc.sh.flush()
		} else if err := sc.u.w.Flush(); err != nil {
			return cs.broken(sc.u)
		}
	}
	for i, sc := range b {
		reply, err := cs.replyOf(sc)
		if err != nil {
			return err
		}
		if kind, _, _ := redirect(reply); kind != "" {
			return cs.answerRedirected(b[i:], slices.Clone(reply))
		}
		if err := cs.answerSent(sc.it, reply); err != nil {
			return err
		}
	}
	return nil
}

// answerRedirected answers the rest of a batch whose first command was
// redirected: it reads every other reply of the batch first, then follows
// the redirections one command at a time.
func (cs *clusterSession) answerRedirected(b []sentCmd, first []byte) error {
	replies := [][]byte{first}
	for _, sc := range b[1:] {
		reply, err := cs.replyOf(sc)
		if err != nil {
			return err
		}
		replies = append(replies, slices.Clone(reply))
	}
	for i, sc := range b {
		reply := replies[i]
		if kind, rslot, target := redirect(reply); kind != "" {
			if kind == "MOVED" {
				cs.m.moved(rslot, target)
			}
			var err error
			if reply, _, err = cs.follow(target, sc.raw, sc.slot, kind == "ASK", 1); err != nil {
				return err
			}
		}
		if err := cs.answerSent(sc.it, reply); err != nil {
			return err
		}
	}
	return nil
}

// replyOf reads the reply of a command of the batch: from its connection,
// or, sent on a shared one, once its reader has handed it over. A shared
// connection that failed under the command ends the session (the command
// may have run), as a connection of its own does.
func (cs *clusterSession) replyOf(sc sentCmd) ([]byte, error) {
	if sc.sh == nil {
		return cs.read(sc.u)
	}
	for !sc.it.ready.Load() {
		select {
		case <-cs.q.wake:
		case <-cs.dead:
			return nil, errFatal
		}
	}
	if sc.it.upErr != nil {
		cs.p.log.Debug("hotspot-proxy: shared upstream", "addr", sc.sh.nc.RemoteAddr(), "err", sc.it.upErr)
		return nil, errFatal
	}
	return sc.it.reply, nil
}

// shared returns the shared connection to addr the session is bound to,
// binding it to one of the master's pool at first (round robin); fresh
// drops the one it had (it failed). nil: the master cannot be dialled.
func (cs *clusterSession) shared(addr string, fresh bool) *sharedConn {
	if c := cs.sh[addr]; c != nil && !fresh {
		return c
	}
	delete(cs.sh, addr)
	sp := cs.m.sharedPool(addr)
	if sp == nil {
		return nil
	}
	i, ok := cs.shSlot[addr]
	if !ok {
		i = sp.pick()
		cs.shSlot[addr] = i
	}
	c, err := sp.conn(i)
	if err != nil {
		cs.p.log.Debug("hotspot-proxy: cluster node", "addr", addr, "err", err)
		return nil
	}
	cs.sh[addr] = c
	return c
}

// answerSent writes the reply of a command of the batch and applies it.
func (cs *clusterSession) answerSent(it *item, reply []byte) error {
	if _, err := cs.cw.Write(reply); err != nil {
		return err
	}
	cs.after(it, reply)
	return nil
}

func (cs *clusterSession) proto() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.st.proto
}

func (cs *clusterSession) owner(slot int) string {
	if a := cs.m.owner(slot); a != "" {
		return a
	}
	return cs.homeAddr()
}

func (cs *clusterSession) homeAddr() string {
	if cs.home == "" {
		_ = cs.m.refresh(cs.p.bg, true)
		cs.home = cs.m.home()
	}
	return cs.home
}

// forwardReply forwards raw (following redirections) and answers the client.
func (cs *clusterSession) forwardReply(it *item, addr string, raw []byte, slot int) error {
	reply, _, err := cs.forward(addr, raw, slot)
	if err != nil {
		return err
	}
	return cs.answer(it, reply)
}

// answer writes a reply read from upstream and applies it.
func (cs *clusterSession) answer(it *item, reply []byte) error {
	if err := cs.reply(reply); err != nil {
		return err
	}
	cs.after(it, reply)
	return nil
}

// forward answers the batch, then sends raw to addr and reads its reply,
// following MOVED (the slot table is updated) and ASK (ASKING first) up to
// maxRedirects times; it returns the last reply (valid until the next read)
// and the node that gave it. A node that cannot be dialled gets the slot
// table refreshed and the command sent to the new owner; if there is none,
// the client gets errUnavailable. An error means the client connection must
// close.
func (cs *clusterSession) forward(addr string, raw []byte, slot int) ([]byte, string, error) {
	if err := cs.answerBatch(); err != nil {
		return nil, addr, err
	}
	return cs.follow(addr, raw, slot, false, 0)
}

// follow is forward with the batch answered: asking sends ASKING first, and
// redirected counts the redirections followed so far.
func (cs *clusterSession) follow(addr string, raw []byte, slot int, asking bool, redirected int) ([]byte, string, error) {
	for i := redirected; ; i++ {
		u, err := cs.conn(addr)
		if errors.Is(err, errDial) {
			if i >= maxRedirects {
				return errUnavailable, addr, nil
			}
			_ = cs.m.refresh(cs.p.bg, true)
			next := cs.m.home()
			if slot >= 0 {
				next = cs.m.owner(slot)
			} else if addr == cs.home {
				cs.home = next
			}
			if next == "" || next == addr {
				return errUnavailable, addr, nil
			}
			addr, asking = next, false
			continue
		}
		if err != nil {
			return nil, addr, err
		}
		if asking {
			_, _ = u.w.WriteString("*1\r\n$6\r\nASKING\r\n")
		}
		if _, err := u.w.Write(raw); err != nil {
			return nil, addr, cs.broken(u)
		}
		if err := u.w.Flush(); err != nil {
			return nil, addr, cs.broken(u)
		}
		if asking {
			if _, err := cs.read(u); err != nil {
				return nil, addr, err
			}
		}
		reply, err := cs.read(u)
		if err != nil {
			return nil, addr, err
		}
		kind, rslot, target := redirect(reply)
		if kind == "" || i >= maxRedirects {
			return reply, addr, nil
		}
		if kind == "MOVED" {
			cs.m.moved(rslot, target)
		}
		addr, asking = target, kind == "ASK"
	}
}

// redirect parses -MOVED slot host:port and -ASK slot host:port.
func redirect(reply []byte) (kind string, slot int, addr string) {
	if len(reply) < 8 || reply[0] != '-' || (reply[1] != 'M' && reply[1] != 'A') {
		return "", 0, ""
	}
	f := bytes.Fields(bytes.TrimSpace(reply[1:]))
	if len(f) != 3 || (string(f[0]) != "MOVED" && string(f[0]) != "ASK") {
		return "", 0, ""
	}
	n, err := strconv.Atoi(string(f[1]))
	if err != nil || n < 0 || n >= numSlots {
		return "", 0, ""
	}
	a := string(f[2])
	if h, port, err := net.SplitHostPort(a); err == nil && h == "" { // the node's own host
		a = net.JoinHostPort("127.0.0.1", port)
	}
	return string(f[0]), n, a
}

func isErrReply(b []byte) bool { return len(b) > 0 && (b[0] == '-' || b[0] == '!') }

var errDial = errors.New("dial")

// conn returns the session's connection to addr, dialled and given the
// recorded connection state if new. errDial: the node is not there; another
// error (the node refused the state): close the client.
func (cs *clusterSession) conn(addr string) (*upConn, error) {
	cs.umu.Lock()
	u, closing := cs.ups[addr], cs.closing
	cs.umu.Unlock()
	if u != nil {
		return u, nil
	}
	if closing {
		return nil, io.EOF
	}
	c, err := cs.m.dial(addr)
	if err != nil {
		cs.p.log.Debug("hotspot-proxy: cluster node", "addr", addr, "err", err)
		cs.m.stale()
		return nil, fmt.Errorf("%w: %v", errDial, err)
	}
	u = &upConn{addr: addr, c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 32<<10)}
	for _, st := range cs.state {
		_, _ = u.w.Write(st.raw)
	}
	if err := u.w.Flush(); err != nil {
		c.Close()
		cs.m.stale()
		return nil, fmt.Errorf("%w: %v", errDial, err)
	}
	for _, st := range cs.state {
		if err := cs.readInto(u, &cs.rm, true); err != nil {
			c.Close()
			return nil, err
		}
		if isErrReply(cs.rm) {
			c.Close()
			cs.p.log.Debug("hotspot-proxy: connection state refused by a cluster node", "addr", addr,
				"command", st.kind, "reply", string(cs.rm))
			return nil, errFatal
		}
	}
	cs.umu.Lock()
	if cs.closing {
		cs.umu.Unlock()
		c.Close()
		return nil, io.EOF
	}
	cs.ups[addr] = u
	cs.umu.Unlock()
	return u, nil
}

// broken drops a failed upstream connection; the client's closes too.
func (cs *clusterSession) broken(u *upConn) error {
	cs.umu.Lock()
	if cs.ups[u.addr] == u {
		delete(cs.ups, u.addr)
	}
	cs.umu.Unlock()
	u.c.Close()
	cs.m.stale()
	return errFatal
}

// read reads one reply from u into cs.rm.
func (cs *clusterSession) read(u *upConn) ([]byte, error) {
	if err := cs.readInto(u, &cs.rm, false); err != nil {
		return nil, err
	}
	return cs.rm, nil
}

// readInto reads one reply: push messages before it go to the client (or
// are dropped, for replies the client never sees); an attribute stays with
// the reply it annotates.
func (cs *clusterSession) readInto(u *upConn, rm *resp3.RawMessage, drop bool) error {
	for {
		if err := rm.UnmarshalRESP(u.r, p3opts.o); err != nil {
			return cs.broken(u)
		}
		switch (*rm)[0] {
		case '>':
			if !drop {
				if _, err := cs.cw.Write(*rm); err != nil {
					return err
				}
			}
			continue
		case '|':
			var next resp3.RawMessage
			if err := cs.readInto(u, &next, drop); err != nil {
				return err
			}
			*rm = append(*rm, next...)
		}
		return nil
	}
}

// stateCommand forwards a connection-state command to the node the session
// is tied to (its transaction's, its WATCH's, else home) and, outside a
// transaction, records it for the connections dialled later; the others are
// closed (dialled again with the state when needed).
func (cs *clusterSession) stateCommand(it *item, in *cmdInfo, cmd command) error {
	args := cmd.Args
	addr := cs.homeAddr()
	if cs.watchNode != "" {
		addr = cs.watchNode
	}
	reply, node, err := cs.forward(addr, cmd.Raw, -1)
	if err != nil {
		return err
	}
	if err := cs.answer(it, reply); err != nil {
		return err
	}
	if isErrReply(reply) {
		return nil
	}
	var kind string
	switch in.kind {
	case kindHello:
		kind = "hello"
	case kindSetName:
		kind = "setname"
	case kindAuth:
		kind = "auth"
	case kindReadonly:
		cs.state = slices.DeleteFunc(cs.state, func(s stateCmd) bool { return s.kind == "readonly" })
		if in.name == "readonly" {
			kind = "readonly"
		}
	case kindSetInfo:
		if len(args) > 2 { // CLIENT SETINFO attr value
			kind = "setinfo:" + string(bytes.ToLower(args[2]))
		}
	}
	if kind != "" {
		cs.state = slices.DeleteFunc(cs.state, func(s stateCmd) bool { return s.kind == kind })
		cs.state = append(cs.state, stateCmd{kind: kind, raw: slices.Clone(cmd.Raw)})
	}
	cs.closeUpstreams(node)
	return nil
}

// multi: with WATCH, MULTI goes to the WATCH's node at once; else the proxy
// answers it and holds it until the transaction's first keyed command.
func (cs *clusterSession) multi(it *item, raw []byte) error {
	switch {
	case cs.pin != "":
		return cs.inTx(it, raw) // nested: the node's error
	case cs.held:
		return cs.local(it, []byte("-ERR MULTI calls can not be nested\r\n"))
	case cs.watchNode != "":
		reply, node, err := cs.forward(cs.watchNode, raw, -1)
		if err != nil {
			return err
		}
		if !isErrReply(reply) {
			cs.pin = node
		}
		return cs.answer(it, reply)
	}
	cs.held, cs.queued, cs.aborted = true, nil, false
	return cs.local(it, []byte("+OK\r\n"))
}

// exec ends a transaction: EXEC or DISCARD on its node; a held one without
// a keyed command runs on home, MULTI and its queued commands first.
func (cs *clusterSession) exec(it *item, raw []byte) error {
	defer func() { cs.pin, cs.held, cs.queued, cs.watchNode = "", false, nil, "" }()
	switch {
	case cs.pin != "":
		return cs.inTx(it, raw)
	case cs.held && cs.aborted:
		if bytes.EqualFold(it.args[0], []byte("discard")) {
			return cs.local(it, []byte("+OK\r\n"))
		}
		return cs.local(it, []byte("-EXECABORT Transaction discarded because of previous errors.\r\n"))
	case cs.held:
		reply, _, err := cs.sendTx(cs.homeAddr(), raw)
		if err != nil {
			return err
		}
		return cs.answer(it, reply)
	}
	addr := cs.homeAddr()
	if cs.watchNode != "" {
		addr = cs.watchNode
	}
	return cs.forwardReply(it, addr, raw, -1) // EXEC without MULTI: the node's error
}

// sendTx sends MULTI, the queued commands and raw to addr and returns raw's
// reply and the first error MULTI or a queued command got, if any.
func (cs *clusterSession) sendTx(addr string, raw []byte) (reply, firstErr []byte, err error) {
	if err := cs.answerBatch(); err != nil {
		return nil, nil, err
	}
	u, err := cs.conn(addr)
	if errors.Is(err, errDial) {
		return errUnavailable, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	_, _ = u.w.WriteString("*1\r\n$5\r\nMULTI\r\n")
	for _, q := range cs.queued {
		_, _ = u.w.Write(q)
	}
	_, _ = u.w.Write(raw)
	if err := u.w.Flush(); err != nil {
		return nil, nil, cs.broken(u)
	}
	for range 1 + len(cs.queued) {
		b, err := cs.read(u)
		if err != nil {
			return nil, nil, err
		}
		if firstErr == nil && isErrReply(b) {
			firstErr = slices.Clone(b)
		}
	}
	reply, err = cs.read(u)
	return reply, firstErr, err
}

// firstInTx sends a held transaction to the master of the slot of its first
// keyed command.
func (cs *clusterSession) firstInTx(it *item, raw []byte, slot int) error {
	addr := cs.owner(slot)
	for i := 0; ; i++ {
		reply, firstErr, err := cs.sendTx(addr, raw)
		if err != nil {
			return err
		}
		kind, rslot, target := redirect(reply)
		if kind == "" {
			if bytes.Equal(reply, errUnavailable) {
				cs.aborted = true
				return cs.answer(it, reply)
			}
			cs.pin, cs.held, cs.queued = addr, false, nil
			if firstErr != nil {
				reply = firstErr
			}
			return cs.answer(it, reply)
		}
		// Not this node's slot: drop the transaction there and start again
		// on the owner (MOVED); a slot being migrated (ASK) fails it.
		u, err := cs.conn(addr)
		if err != nil {
			return err
		}
		_, _ = u.w.WriteString("*1\r\n$7\r\nDISCARD\r\n")
		if err := u.w.Flush(); err != nil {
			return cs.broken(u)
		}
		if _, err := cs.read(u); err != nil {
			return err
		}
		if kind == "ASK" || i >= maxRedirects {
			cs.aborted = true
			return cs.answer(it, []byte("-TRYAGAIN hotspot-proxy: slot "+strconv.Itoa(rslot)+" is moving; transaction aborted\r\n"))
		}
		cs.m.moved(rslot, target)
		addr = target
	}
}

// inTx sends a command of an open transaction to its node: a redirection
// there means a key of another slot, which Redis Cluster refuses in a
// transaction (the node flags it: EXEC fails with EXECABORT).
func (cs *clusterSession) inTx(it *item, raw []byte) error {
	if err := cs.answerBatch(); err != nil {
		return err
	}
	u, err := cs.conn(cs.pin)
	if errors.Is(err, errDial) {
		return errFatal
	}
	if err != nil {
		return err
	}
	if _, err := u.w.Write(raw); err != nil {
		return cs.broken(u)
	}
	if err := u.w.Flush(); err != nil {
		return cs.broken(u)
	}
	reply, err := cs.read(u)
	if err != nil {
		return err
	}
	if kind, _, _ := redirect(reply); kind != "" {
		reply = errCrossSlot
	}
	return cs.answer(it, reply)
}

// startPipe turns the session into a byte pipe with addr (SUBSCRIBE, MONITOR
// and the like): raw goes there, and everything that comes back goes to the
// client, until either side closes.
func (cs *clusterSession) startPipe(addr string, raw []byte) error {
	if err := cs.answerBatch(); err != nil {
		return err
	}
	u, err := cs.conn(addr)
	if errors.Is(err, errDial) {
		return cs.reply(errUnavailable)
	}
	if err != nil {
		return err
	}
	if err := cs.cw.Flush(); err != nil {
		return err
	}
	cs.closeUpstreams(u.addr)
	if _, err := u.w.Write(raw); err != nil {
		return err
	}
	cs.pipeUp = u
	cs.piped = make(chan struct{})
	go func() { // run waits for it
		defer close(cs.piped)
		_, _ = io.Copy(cs.cc, u.r)
		cs.cc.Close()
	}()
	return nil
}

// reset: RESET on home; every other upstream connection is closed (which
// drops its transaction and WATCH), the recorded state forgotten.
func (cs *clusterSession) reset(it *item, raw []byte) error {
	if err := cs.answerBatch(); err != nil {
		return err
	}
	home := cs.homeAddr()
	cs.closeUpstreams(home)
	cs.state, cs.watchNode, cs.pin, cs.held, cs.queued, cs.aborted = nil, "", "", false, nil, false
	return cs.forwardReply(it, home, raw, -1)
}
