package zkgroup

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Watch calls fn with the members of the group dir (child name -> data) at
// first and after every change, until ctx ends; then it returns ctx.Err().
// A change is a child created or deleted, or a child's data written (even
// with the same bytes: a rewrite is how a writer renews its entry).
//
// Each event costs one read: a child watch re-lists dir and reads only new
// children, and each child has its own data watch, so a write to one child
// re-reads that child alone. Events that arrive together are delivered as one
// call. After a reconnect go-zookeeper restores the watches; after a session
// expiry Watch re-arms and re-reads everything and calls fn only if
// something differs from what it last delivered. A dir that does not exist
// has no members; Watch waits for it to appear.
//
// fn runs on Watch's goroutine and owns the map; the next change waits for
// it to return. Watch returns ErrSessionClosed if s is closed, or an error
// for a bad path or missing permissions; it retries every other failure
// with backoff.
func (s *Session) Watch(ctx context.Context, dir string, fn func(members map[string][]byte)) error {
	return s.WatchSome(ctx, dir, nil, fn)
}

// WatchSome is Watch reading the data of only the children for which read
// returns true (nil: all); the others are listed, with nil data, and a
// write to one of them costs nothing. read is called once per child, when
// it first appears.
func (s *Session) WatchSome(ctx context.Context, dir string, read func(name string) bool, fn func(members map[string][]byte)) error {
	if err := checkPath(dir); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	// Watch channels come and go with the children; one small goroutine per
	// armed watch forwards its single event here, tagged with the generation
	// it was armed in, so a late event of a replaced watch is ignored.
	events := make(chan fired, 16)
	forward := func(name string, gen uint64, ch <-chan zk.Event) {
		wg.Go(func() {
			select {
			case ev := <-ch:
				select {
				case events <- fired{name, gen, ev}:
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
		})
	}

	if read == nil {
		read = func(string) bool { return true }
	}
	w := groupWatch{s: s, dir: dir, members: map[string]*member{}, forward: forward, read: read}
	r := retrier{s: s, what: "watch " + dir}
	delivered := false
	for {
		if err := w.sync(); err != nil {
			if err := r.retry(ctx, err); err != nil {
				return err
			}
			continue
		}
		r.reset()
		if w.changed || !delivered {
			fn(w.snapshot())
			w.changed, delivered = false, true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return ErrSessionClosed
		case ev := <-events:
			w.disarm(ev)
		}
		for drained := false; !drained; { // batch events that arrived together
			select {
			case ev := <-events:
				w.disarm(ev)
			default:
				drained = true
			}
		}
	}
}

type fired struct {
	name string // "" for the watch on dir
	gen  uint64
	ev   zk.Event
}

type member struct {
	data  []byte
	mzxid int64 // zxid of the last write we delivered; 0 before the first read
	armed bool  // a data watch of generation gen is pending
	gen   uint64
}

// groupWatch is the state of one Watch; only its goroutine touches it.
type groupWatch struct {
	s       *Session
	dir     string
	members map[string]*member
	forward func(name string, gen uint64, ch <-chan zk.Event)
	read    func(name string) bool // whether to read (and watch) a child's data

	dirArmed bool // a child watch (or, while dir is missing, an exists watch) is pending
	dirGen   uint64
	gen      uint64 // last generation handed out
	changed  bool   // members differ from the last delivery
}

// sync re-arms every watch that is not pending, reading what it covers.
func (w *groupWatch) sync() error {
	conn := w.s.conn
	if !w.dirArmed {
		names, ch, err := w.list(conn)
		if err != nil {
			return err
		}
		w.gen++
		w.dirGen, w.dirArmed = w.gen, true
		w.forward("", w.gen, ch)
		present := make(map[string]bool, len(names))
		for _, n := range names {
			present[n] = true
			if w.members[n] == nil {
				m := &member{}
				if !w.read(n) {
					m.armed, w.changed = true, true // listed only: never read, never re-armed
				}
				w.members[n] = m
			}
		}
		for n := range w.members {
			if !present[n] {
				delete(w.members, n)
				w.changed = true
			}
		}
	}
	for name, m := range w.members {
		if m.armed {
			continue
		}
		data, stat, ch, err := conn.GetW(child(w.dir, name))
		w.s.m.watchReads.Inc()
		w.s.m.watchBytes.Add(float64(len(data)))
		if errors.Is(err, zk.ErrNoNode) {
			// Gone since the listing; the child watch reports it too.
			delete(w.members, name)
			w.changed = true
			continue
		}
		if err != nil {
			return err
		}
		w.gen++
		m.gen, m.armed = w.gen, true
		w.forward(name, w.gen, ch)
		if stat.Mzxid != m.mzxid {
			m.data, m.mzxid = data, stat.Mzxid
			w.changed = true
		}
	}
	return nil
}

// list returns dir's children and a watch on them; while dir does not
// exist, no children and a watch that fires when it is created.
func (w *groupWatch) list(conn *zk.Conn) ([]string, <-chan zk.Event, error) {
	for {
		names, _, ch, err := conn.ChildrenW(w.dir)
		w.s.m.watchReads.Inc()
		if !errors.Is(err, zk.ErrNoNode) {
			return names, ch, err
		}
		ok, _, ch, err := conn.ExistsW(w.dir)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, ch, nil
		}
		// Created between the two calls: list it. The exists watch just
		// set is left to fire once, harmlessly, into a dropped channel.
	}
}

// disarm marks the watch that fired as no longer pending, so that sync
// re-arms it and re-reads what it covers. Any event does: a change, a
// deletion, or EventNotWatching after a session expiry.
func (w *groupWatch) disarm(f fired) {
	if f.name == "" {
		if f.gen == w.dirGen {
			w.dirArmed = false
		}
		return
	}
	if m := w.members[f.name]; m != nil && m.gen == f.gen {
		m.armed = false
	}
}

func (w *groupWatch) snapshot() map[string][]byte {
	out := make(map[string][]byte, len(w.members))
	for n, m := range w.members {
		out[n] = m.data
	}
	return out
}
