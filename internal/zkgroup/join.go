package zkgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Join makes the session a member of the group dir under the name id: it
// keeps the ephemeral node dir/id holding data for as long as ctx lasts,
// creating dir if needed. Join blocks; run it in the goroutine (or errgroup)
// that owns the membership.
//
// The node is re-created in the new session after a session expiry, and
// after anyone deletes it. If another session holds dir/id (an earlier
// incarnation of this process whose session has not expired yet, or a
// duplicate id), Join logs it and waits for that node to go, then takes the
// name. When ctx ends, Join deletes its node and returns ctx.Err(). It
// returns ErrSessionClosed if s is closed first, or an error for a bad path
// or missing permissions; it retries every other failure with backoff.
func (s *Session) Join(ctx context.Context, dir, id string, data []byte) error {
	if err := checkPath(dir); err != nil {
		return err
	}
	if err := checkName(id); err != nil {
		return err
	}
	p := child(dir, id)
	r := retrier{s: s, what: "join " + p}
	var foreign int64 // session that holds p, last logged
	held := false     // this session's node is in place, as far as we know
	for {
		select {
		case <-ctx.Done():
			s.leave(p)
			return ctx.Err()
		case <-s.closed:
			return ErrSessionClosed
		default:
		}
		fired, owner, err := s.hold(dir, p, data)
		if err != nil {
			if err := r.retry(ctx, err); err != nil {
				if ctx.Err() != nil {
					s.leave(p)
				}
				return err
			}
			continue
		}
		r.reset()
		switch {
		case owner != 0 && owner != foreign:
			s.log.Warn("zookeeper: member name held by another session; waiting for it to go",
				"path", p, "owner", fmt.Sprintf("%#x", owner))
		case owner == 0 && !held:
			s.log.Info("zookeeper: member joined", "path", p, "session", fmt.Sprintf("%#x", s.conn.SessionID()))
		}
		foreign, held = owner, owner == 0
		select {
		case <-ctx.Done():
			s.leave(p)
			return ctx.Err()
		case <-s.closed:
			return ErrSessionClosed
		case ev := <-fired:
			// Deleted, changed, or the watch was dropped by a session
			// expiry or a close: look again.
			if ev.Type != zk.EventNodeDataChanged {
				held = false
			}
		}
	}
}

// hold makes sure p exists, holds data and belongs to this session, and
// returns a watch on it. A non-zero owner means another session holds p; the
// watch then fires when that changes.
func (s *Session) hold(dir, p string, data []byte) (fired <-chan zk.Event, owner int64, err error) {
	conn := s.conn
	_, err = conn.Create(p, data, zk.FlagEphemeral, s.acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err = ensurePath(conn, dir, s.acl); err != nil {
			return nil, 0, err
		}
		_, err = conn.Create(p, data, zk.FlagEphemeral, s.acl)
	}
	// ErrNodeExists may be our own node: a create whose reply was lost to
	// a disconnect, or an earlier round of this loop. The owner check
	// below tells.
	existed := errors.Is(err, zk.ErrNodeExists)
	if err != nil && !existed {
		return nil, 0, err
	}
	ok, stat, fired, err := conn.ExistsW(p)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("%s vanished after create", p) // retried at once-ish
	}
	if stat.EphemeralOwner != conn.SessionID() {
		return fired, stat.EphemeralOwner, nil
	}
	if existed {
		// Ours already; make sure it says what this Join says.
		cur, _, err := conn.Get(p)
		if err != nil {
			return nil, 0, err
		}
		if !bytes.Equal(cur, data) {
			if _, err := conn.Set(p, data, -1); err != nil {
				return nil, 0, err
			}
		}
	}
	return fired, 0, nil
}

// leave deletes p if this session holds it. Failure is harmless: the node
// goes with the session.
func (s *Session) leave(p string) {
	select {
	case <-s.closed:
		return
	default:
	}
	conn := s.conn
	ok, stat, err := conn.Exists(p)
	if err == nil && ok && stat.EphemeralOwner == conn.SessionID() {
		err = conn.Delete(p, -1)
	}
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.log.Warn("zookeeper: could not delete member node; it goes when the session ends", "path", p, "err", err)
		return
	}
	s.log.Info("zookeeper: member left", "path", p)
}
