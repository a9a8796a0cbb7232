package zkgroup

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// This file exports to the tests what no product code needs.

// Conn returns the session's connection, for tests that check ZooKeeper's
// side of what the session did (owners of ephemeral nodes, session ids).
func (s *Session) Conn() *zk.Conn { return s.conn }

// WatchData calls fn with the data of the node path, and whether it exists,
// at first and after every change (a write, even of the same bytes; a
// creation; a deletion), until ctx ends; then it returns ctx.Err(). It
// re-arms its watch like Watch and calls fn after a reconnect or a session
// expiry only if the node differs from what it last delivered. fn runs on
// WatchData's goroutine. Errors are as for Watch.
func WatchData(ctx context.Context, s *Session, path string, fn func(data []byte, exists bool)) error {
	if err := checkPath(path); err != nil {
		return err
	}
	conn := s.conn
	r := retrier{s: s, what: "watch data " + path}
	delivered, lastExists, lastMzxid := false, false, int64(0)
	for {
		data, stat, ch, err := conn.GetW(path)
		exists := err == nil
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = conn.ExistsW(path)
			if err == nil && ok {
				continue // created between the two calls; read it
			}
		}
		if err != nil {
			if err := r.retry(ctx, err); err != nil {
				return err
			}
			continue
		}
		r.reset()
		if !delivered || exists != lastExists || (exists && stat.Mzxid != lastMzxid) {
			fn(data, exists)
			delivered, lastExists = true, exists
			if exists {
				lastMzxid = stat.Mzxid
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return ErrSessionClosed
		case <-ch:
		}
	}
}
