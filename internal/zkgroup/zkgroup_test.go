package zkgroup_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/internal/promtest"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

const wait = 20 * time.Second // bound on any single expected event

// setup returns the ZooKeeper address and a unique root that is deleted
// when the test ends (after its sessions are closed).
func setup(t *testing.T) (addr, root string) {
	t.Helper()
	addr = stacktest.ZK(t)
	root = "/" + stacktest.Name(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
		if err != nil {
			t.Logf("cleanup of %s: %v", root, err)
			return
		}
		defer s.Close()
		if err := deleteAll(s.Conn(), root); err != nil {
			t.Logf("cleanup of %s: %v", root, err)
		}
	})
	return addr, root
}

func deleteAll(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteAll(conn, p+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

func connect(t *testing.T, addr string, cfg zkgroup.Config) *zkgroup.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{addr}, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// loop runs a blocking call of this package in a goroutine; stop cancels it
// and returns its error.
type loop struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, f func(ctx context.Context) error) *loop {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	l := &loop{cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- f(ctx) }()
	t.Cleanup(func() { l.stop(t) })
	return l
}

func (l *loop) stop(t *testing.T) error {
	t.Helper()
	l.cancel()
	select {
	case err := <-l.done:
		l.done <- err // later stops see it too
		return err
	case <-time.After(wait):
		t.Fatal("loop did not return after cancel")
		return nil
	}
}

// recorder collects the member sets that Watch reports.
type recorder struct{ ch chan map[string]string }

func newRecorder() *recorder { return &recorder{ch: make(chan map[string]string, 1000)} }

func (r *recorder) fn(members map[string][]byte) {
	m := make(map[string]string, len(members))
	for k, v := range members {
		m[k] = string(v)
	}
	r.ch <- m
}

// await reads reports until one equals want.
func (r *recorder) await(t *testing.T, what string, want map[string]string) {
	t.Helper()
	deadline := time.After(wait)
	var last map[string]string
	for {
		select {
		case got := <-r.ch:
			if maps.Equal(got, want) {
				return
			}
			last = got
		case <-deadline:
			t.Fatalf("%s: members = %v, want %v", what, last, want)
		}
	}
}

// quiet fails if a report arrives within d (no change, no call).
func (r *recorder) quiet(t *testing.T, what string, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.ch:
		t.Fatalf("%s: unexpected report %v", what, got)
	case <-time.After(d):
	}
}

func watchGroup(t *testing.T, s *zkgroup.Session, dir string) (*recorder, *loop) {
	rec := newRecorder()
	return rec, start(t, func(ctx context.Context) error { return s.Watch(ctx, dir, rec.fn) })
}

func join(t *testing.T, s *zkgroup.Session, dir, id, data string) *loop {
	return start(t, func(ctx context.Context) error { return s.Join(ctx, dir, id, []byte(data)) })
}

func awaitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s: not closed after %v", what, wait)
	}
}

func TestEnsurePath(t *testing.T) {
	addr, root := setup(t)
	s := connect(t, addr, zkgroup.Config{})
	p := root + "/a/b/c"
	for i := range 2 { // the second call finds everything in place
		if err := zkgroup.EnsurePath(s.Conn(), p); err != nil {
			t.Fatalf("EnsurePath(%s) #%d: %v", p, i+1, err)
		}
	}
	if ok, stat, err := s.Conn().Exists(p); err != nil || !ok || stat.EphemeralOwner != 0 {
		t.Fatalf("Exists(%s) = %v, %+v, %v; want a persistent node", p, ok, stat, err)
	}
	for _, bad := range []string{"", "a/b", root + "/", root + "//x"} {
		if err := zkgroup.EnsurePath(s.Conn(), bad); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("EnsurePath(%q) = %v, want ErrInvalidPath", bad, err)
		}
	}
}

// TestJoinAndWatch: joins, a data write, a leave and a closed session are
// all seen by a watcher that started before the group existed.
func TestJoinAndWatch(t *testing.T) {
	addr, root := setup(t)
	dir := root + "/members/aggregators"
	w := connect(t, addr, zkgroup.Config{})
	a := connect(t, addr, zkgroup.Config{})
	b := connect(t, addr, zkgroup.Config{})

	rec, _ := watchGroup(t, w, dir)
	rec.await(t, "before any member", map[string]string{})

	ja := join(t, a, dir, "agg-a", "A1")
	rec.await(t, "a joined", map[string]string{"agg-a": "A1"})
	join(t, b, dir, "agg-b", "B1")
	rec.await(t, "b joined", map[string]string{"agg-a": "A1", "agg-b": "B1"})

	// A child's data write is a change (hotwatch relies on it), even with
	// the same bytes. The child here is a plain node, not one Join keeps.
	if _, err := b.Conn().Create(dir+"/plain", []byte("P1"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "plain child created", map[string]string{"agg-a": "A1", "agg-b": "B1", "plain": "P1"})
	if _, err := b.Conn().Set(dir+"/plain", []byte("P2"), -1); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "child data written", map[string]string{"agg-a": "A1", "agg-b": "B1", "plain": "P2"})
	if _, err := b.Conn().Set(dir+"/plain", []byte("P2"), -1); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "child data rewritten", map[string]string{"agg-a": "A1", "agg-b": "B1", "plain": "P2"})
	if err := b.Conn().Delete(dir+"/plain", -1); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "plain child deleted", map[string]string{"agg-a": "A1", "agg-b": "B1"})

	// Join keeps its node saying what it was given.
	if _, err := w.Conn().Set(dir+"/agg-b", []byte("tampered"), -1); err != nil {
		t.Fatal(err)
	}
	awaitNode(t, w.Conn(), dir+"/agg-b", func(d []byte, _ *zk.Stat) bool { return string(d) == "B1" })
	rec.await(t, "Join restored its data", map[string]string{"agg-a": "A1", "agg-b": "B1"})

	if err := ja.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Join after cancel = %v, want context.Canceled", err)
	}
	rec.await(t, "a left", map[string]string{"agg-b": "B1"})
	if ok, _, _ := w.Conn().Exists(dir + "/agg-a"); ok {
		t.Error("a's node still exists after its Join returned")
	}
	b.Close()
	rec.await(t, "b's session closed", map[string]string{})
}

// TestJoinAfterSessionExpiry: a member whose session expires is re-created
// in the new session, and Expired fires.
func TestJoinAfterSessionExpiry(t *testing.T) {
	addr, root := setup(t)
	dir := root + "/members"
	w := connect(t, addr, zkgroup.Config{})
	cut := &stacktest.Cutter{}
	m := connect(t, addr, zkgroup.Config{SessionTimeout: time.Second, Dialer: cut.Dial})

	rec, _ := watchGroup(t, w, dir)
	join(t, m, dir, "m1", "data")
	rec.await(t, "joined", map[string]string{"m1": "data"})
	old := m.Conn().SessionID()
	expired := m.Expired()

	cut.Cut() // longer than the session timeout: the server expires it
	rec.await(t, "session expired on the server", map[string]string{})
	cut.Heal()

	awaitClosed(t, "Expired()", expired)
	rec.await(t, "member re-created", map[string]string{"m1": "data"})
	_, stat, err := w.Conn().Get(dir + "/m1")
	if err != nil {
		t.Fatal(err)
	}
	if now := m.Conn().SessionID(); stat.EphemeralOwner != now || now == old {
		t.Errorf("node owner %#x, member session %#x (was %#x); want the new session", stat.EphemeralOwner, now, old)
	}
	if next := m.Expired(); next == expired {
		t.Error("Expired() returned the fired channel again, want a fresh one for the new session")
	}
}

// TestWatchAfterReconnect: a change made while the watcher is disconnected
// (session kept) is reported after it reconnects, and later changes too.
func TestWatchAfterReconnect(t *testing.T) {
	addr, root := setup(t)
	dir := root + "/g"
	cut := &stacktest.Cutter{}
	w := connect(t, addr, zkgroup.Config{SessionTimeout: 20 * time.Second, Dialer: cut.Dial})
	a := connect(t, addr, zkgroup.Config{})
	sid, expired := w.Conn().SessionID(), w.Expired()

	rec, _ := watchGroup(t, w, dir)
	if err := zkgroup.EnsurePath(a.Conn(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Conn().Create(dir+"/a", []byte("1"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "created", map[string]string{"a": "1"})

	cut.Cut()
	if _, err := a.Conn().Create(dir+"/b", []byte("2"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Conn().Set(dir+"/a", []byte("1b"), -1); err != nil {
		t.Fatal(err)
	}
	cut.Heal()
	rec.await(t, "changes made while disconnected", map[string]string{"a": "1b", "b": "2"})

	if err := a.Conn().Delete(dir+"/b", -1); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "change after reconnect", map[string]string{"a": "1b"})
	if got := w.Conn().SessionID(); got != sid {
		t.Errorf("session %#x after reconnect, want %#x kept", got, sid)
	}
	select {
	case <-expired:
		t.Error("Expired() fired on a mere reconnect")
	default:
	}
}

// TestWatchAfterSessionExpiry: the watcher's own session expires while the
// group and a watched node change; after the new session both loops re-arm,
// report the current state once, and keep reporting changes.
func TestWatchAfterSessionExpiry(t *testing.T) {
	addr, root := setup(t)
	dir, node := root+"/g", root+"/config"
	cut := &stacktest.Cutter{}
	w := connect(t, addr, zkgroup.Config{SessionTimeout: time.Second, Dialer: cut.Dial})
	a := connect(t, addr, zkgroup.Config{})
	if err := zkgroup.EnsurePath(a.Conn(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Conn().Create(node, []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	rec, _ := watchGroup(t, w, dir)
	data := make(chan string, 100)
	start(t, func(ctx context.Context) error {
		return zkgroup.WatchData(ctx, w, node, func(d []byte, ok bool) { data <- fmt.Sprintf("%s/%v", d, ok) })
	})
	ja := join(t, a, dir, "a", "1")
	rec.await(t, "joined", map[string]string{"a": "1"})
	awaitData(t, data, "v1/true")

	// A probe node of the watcher's session tells when the server expired it.
	probe := root + "/probe"
	if _, err := w.Conn().Create(probe, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := a.Conn().ExistsW(probe)
	if err != nil {
		t.Fatal(err)
	}
	expired := w.Expired()
	cut.Cut()
	select {
	case <-gone:
	case <-time.After(wait):
		t.Fatal("the watcher's session did not expire on the server")
	}
	if err := ja.stop(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join = %v", err)
	}
	join(t, a, dir, "b", "2")
	if _, err := a.Conn().Set(node, []byte("v2"), -1); err != nil {
		t.Fatal(err)
	}
	awaitNode(t, a.Conn(), dir+"/b", func([]byte, *zk.Stat) bool { return true })
	cut.Heal()
	awaitClosed(t, "Expired()", expired)
	rec.await(t, "state after expiry", map[string]string{"b": "2"})
	awaitData(t, data, "v2/true")

	if _, err := a.Conn().Create(dir+"/c", []byte("3"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "change in the new session", map[string]string{"b": "2", "c": "3"})
	if err := a.Conn().Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	awaitData(t, data, "/false")
}

// awaitNode waits, by watches, until node p exists and ok(data, stat).
func awaitNode(t *testing.T, conn *zk.Conn, p string, ok func([]byte, *zk.Stat) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		data, st, ch, err := conn.GetW(p)
		if errors.Is(err, zk.ErrNoNode) {
			var exists bool
			exists, _, ch, err = conn.ExistsW(p)
			if err == nil && exists {
				continue
			}
		}
		if err != nil {
			t.Fatalf("watch %s: %v", p, err)
		}
		if st != nil && ok(data, st) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not in the expected state after %v (data %q)", p, wait, data)
		}
	}
}

func awaitData(t *testing.T, ch chan string, want string) {
	t.Helper()
	deadline := time.After(wait)
	var last string
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
			last = got
		case <-deadline:
			t.Fatalf("WatchData: last %q, want %q", last, want)
		}
	}
}

func TestWatchData(t *testing.T) {
	addr, root := setup(t)
	s := connect(t, addr, zkgroup.Config{})
	node := root + "/x/config"
	got := make(chan string, 100)
	start(t, func(ctx context.Context) error {
		return zkgroup.WatchData(ctx, s, node, func(d []byte, ok bool) { got <- fmt.Sprintf("%s/%v", d, ok) })
	})
	next := func(what, want string) {
		t.Helper()
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("%s: WatchData reported %q, want %q", what, g, want)
			}
		case <-time.After(wait):
			t.Fatalf("%s: no report, want %q", what, want)
		}
	}
	next("missing", "/false")
	if err := zkgroup.EnsurePath(s.Conn(), root+"/x"); err != nil {
		t.Fatal(err)
	}
	conn := s.Conn()
	steps := []struct {
		what string
		do   func() error
		want string
	}{
		{"create", func() error { _, err := conn.Create(node, []byte("v1"), 0, zk.WorldACL(zk.PermAll)); return err }, "v1/true"},
		{"rewrite same bytes", func() error { _, err := conn.Set(node, []byte("v1"), -1); return err }, "v1/true"},
		{"write", func() error { _, err := conn.Set(node, []byte("v2"), -1); return err }, "v2/true"},
		{"delete", func() error { return conn.Delete(node, -1) }, "/false"},
		{"re-create", func() error { _, err := conn.Create(node, []byte("v3"), 0, zk.WorldACL(zk.PermAll)); return err }, "v3/true"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		next(st.what, st.want)
	}
}

// TestJoinWaitsForOtherOwner: a name held by another session (say, this
// member's previous incarnation) is taken over once that node goes.
func TestJoinWaitsForOtherOwner(t *testing.T) {
	addr, root := setup(t)
	dir := root + "/g"
	w := connect(t, addr, zkgroup.Config{})
	prev := connect(t, addr, zkgroup.Config{})
	next := connect(t, addr, zkgroup.Config{})
	if err := zkgroup.EnsurePath(prev.Conn(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := prev.Conn().Create(dir+"/m", []byte("old"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rec, _ := watchGroup(t, w, dir)
	rec.await(t, "previous holder", map[string]string{"m": "old"})
	join(t, next, dir, "m", "new")
	rec.quiet(t, "Join must not take a live node", 300*time.Millisecond)
	prev.Close()
	rec.await(t, "taken over", map[string]string{"m": "new"})
	_, stat, err := w.Conn().Get(dir + "/m")
	if err != nil || stat.EphemeralOwner != next.Conn().SessionID() {
		t.Errorf("owner %#x, %v; want the joining session %#x", stat.EphemeralOwner, err, next.Conn().SessionID())
	}
}

func TestJoinRestoresDeletedNode(t *testing.T) {
	addr, root := setup(t)
	dir := root + "/g"
	s := connect(t, addr, zkgroup.Config{})
	rec, _ := watchGroup(t, s, dir)
	join(t, s, dir, "m", "d")
	rec.await(t, "joined", map[string]string{"m": "d"})
	conn := s.Conn()
	_, before, err := conn.Get(dir + "/m")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete(dir+"/m", -1); err != nil {
		t.Fatal(err)
	}
	// Join may re-create it before anyone sees it gone: look for a new
	// creation (Czxid), not for an empty group.
	awaitNode(t, conn, dir+"/m", func(_ []byte, st *zk.Stat) bool {
		return st.Czxid != before.Czxid && st.EphemeralOwner == conn.SessionID()
	})
	rec.await(t, "restored", map[string]string{"m": "d"})
}

func TestBadArguments(t *testing.T) {
	addr, root := setup(t)
	s := connect(t, addr, zkgroup.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	noop := func(map[string][]byte) {}
	if err := s.Watch(ctx, "relative", noop); !errors.Is(err, zk.ErrInvalidPath) {
		t.Errorf("Watch(relative path) = %v, want ErrInvalidPath", err)
	}
	for _, id := range []string{"", "a/b", ".."} {
		if err := s.Join(ctx, root, id, nil); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("Join(id %q) = %v, want ErrInvalidPath", id, err)
		}
	}
	if err := zkgroup.WatchData(ctx, s, root+"/", func([]byte, bool) {}); !errors.Is(err, zk.ErrInvalidPath) {
		t.Errorf("WatchData(trailing slash) = %v, want ErrInvalidPath", err)
	}
}

// TestCloseStopsLoops: closing the session ends Join, Watch and WatchData
// with ErrSessionClosed.
func TestCloseStopsLoops(t *testing.T) {
	addr, root := setup(t)
	s := connect(t, addr, zkgroup.Config{})
	rec, wl := watchGroup(t, s, root+"/g")
	jl := join(t, s, root+"/g", "m", "d")
	rec.await(t, "joined", map[string]string{"m": "d"})
	dl := start(t, func(ctx context.Context) error {
		return zkgroup.WatchData(ctx, s, root+"/g/m", func([]byte, bool) {})
	})
	s.Close()
	s.Close() // twice is fine
	for name, l := range map[string]*loop{"Watch": wl, "Join": jl, "WatchData": dl} {
		select {
		case err := <-l.done:
			l.done <- err
			if !errors.Is(err, zkgroup.ErrSessionClosed) {
				t.Errorf("%s after Close = %v, want ErrSessionClosed", name, err)
			}
		case <-time.After(wait):
			t.Errorf("%s did not return after Close", name)
		}
	}
}

func TestConnectRespectsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := zkgroup.Connect(ctx, []string{"127.0.0.1:1"}, zkgroup.Config{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect to a closed port = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Connect took %v after its context ended", d)
	}
	if _, err := zkgroup.Connect(context.Background(), nil, zkgroup.Config{}); err == nil {
		t.Error("Connect with no servers succeeded")
	}
}

// TestWatchSome checks that the children WatchSome does not read are listed
// with nil data and that writes to them cost no read and no call, while a
// write to a child it reads costs one read of that child; the watch
// counters count exactly those reads.
func TestWatchSome(t *testing.T) {
	addr, root := setup(t)
	reg := prometheus.NewRegistry()
	s := connect(t, addr, zkgroup.Config{Registerer: reg})
	w := connect(t, addr, zkgroup.Config{})
	dir := root + "/g"
	for name, data := range map[string]string{"read": "r1", "listed": "l1"} {
		if err := w.Create(t.Context(), dir+"/"+name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	start(t, func(ctx context.Context) error {
		return s.WatchSome(ctx, dir, func(name string) bool { return name == "read" }, rec.fn)
	})
	rec.await(t, "first read", map[string]string{"read": "r1", "listed": ""})
	reads, bytes := promtest.Counter(t, reg, "hotspot_zk_watch_reads_total"), promtest.Counter(t, reg, "hotspot_zk_watch_read_bytes_total")
	if reads != 2 || bytes != 2 { // the listing, then "read"
		t.Errorf("first read: %v reads of %v bytes, want 2 of 2", reads, bytes)
	}
	if err := w.Set(t.Context(), dir+"/listed", []byte("l2, longer"), -1); err != nil {
		t.Fatal(err)
	}
	if err := w.Set(t.Context(), dir+"/read", []byte("r2"), -1); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "a write to the child read", map[string]string{"read": "r2", "listed": ""})
	if d, b := promtest.Counter(t, reg, "hotspot_zk_watch_reads_total")-reads, promtest.Counter(t, reg, "hotspot_zk_watch_read_bytes_total")-bytes; d != 1 || b != 2 {
		t.Errorf("two writes, one to a child not read: %v reads of %v bytes, want 1 of 2", d, b)
	}
}
