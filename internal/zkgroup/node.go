package zkgroup

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
)

// The node operations below are what the adapters built on a Session
// (zkpublish, pinstore) need. go-zookeeper's calls take no context and wait
// out a disconnection, so each call runs in its own goroutine and returns at
// ctx's end; the abandoned goroutine ends when the connection answers or is
// closed (Close). A write waits for the connection before it is made (see
// write), so that one given up on is never sent later. Errors are
// go-zookeeper's (zk.ErrNoNode, zk.ErrBadVersion, ...), unwrapped, so
// callers can test them with errors.Is.

// Get returns the data and stat of node p.
func (s *Session) Get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	type got struct {
		data []byte
		stat *zk.Stat
	}
	g, err := do(ctx, func() (got, error) {
		data, stat, err := s.conn.Get(p)
		return got{data, stat}, err
	})
	return g.data, g.stat, err
}

// Children returns the names of p's children.
func (s *Session) Children(ctx context.Context, p string) ([]string, error) {
	return do(ctx, func() ([]string, error) {
		names, _, err := s.conn.Children(p)
		return names, err
	})
}

// Set overwrites the data of node p if its version is version (-1: any).
func (s *Session) Set(ctx context.Context, p string, data []byte, version int32) error {
	return s.write(ctx, func() error {
		_, err := s.conn.Set(p, data, version)
		return err
	})
}

// Create creates the persistent node p holding data, and its missing
// parents, with the session's ACL (Config.ACL). It fails with zk.ErrNodeExists if p
// exists.
func (s *Session) Create(ctx context.Context, p string, data []byte) error {
	return s.write(ctx, func() error {
		if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
			return err
		}
		_, err := s.conn.Create(p, data, 0, s.acl)
		return err
	})
}

// CreatePrivate is Create for a node that holds secrets: the node (not its
// parents) is readable and writable by the session's own identity
// (Config.ACL's Writer) only, never by the ACL's readers. Without a Writer
// identity nodes are open, as for Create.
func (s *Session) CreatePrivate(ctx context.Context, p string, data []byte) error {
	return s.write(ctx, func() error {
		if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
			return err
		}
		_, err := s.conn.Create(p, data, 0, s.secret)
		return err
	})
}

// Put writes data to the persistent node p, creating it and its parents
// (with the session's ACL) when missing. It retries a few times when a concurrent deletion of a
// parent gets in between.
func (s *Session) Put(ctx context.Context, p string, data []byte) error {
	return s.write(ctx, func() error {
		for range 3 {
			if _, err := s.conn.Set(p, data, -1); !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
				return err
			}
			if _, err := s.conn.Create(p, data, 0, s.acl); !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
		return zk.ErrNoNode
	})
}

// Delete deletes node p if its version is version (-1: any).
func (s *Session) Delete(ctx context.Context, p string, version int32) error {
	return s.write(ctx, func() error { return s.conn.Delete(p, version) })
}

// connectPoll is how often a write waiting for the connection looks again.
const connectPoll = 20 * time.Millisecond

// write makes the write f (see do) once the connection has a session,
// waiting for one until ctx ends. go-zookeeper queues a request made while
// it is disconnected and sends it when it connects again, in a new session
// too: a write whose caller gave up long ago would land then, over what the
// caller wrote since. An aggregator retrying its publication through a
// 25 s partition had every attempt land after the heal, and a key cold for
// seconds was back in an app's hot set. Waiting here queues nothing; a
// request sent just before the connection drops is failed by go-zookeeper,
// not sent again. (One made in the instant between the check and the drop
// may still be queued.)
func (s *Session) write(ctx context.Context, f func() error) error {
	for !s.Connected() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return zk.ErrClosing
		case <-time.After(connectPoll):
		}
	}
	_, err := do(ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// do runs one blocking ZooKeeper call f under ctx (see above).
func do[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
