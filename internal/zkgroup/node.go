package zkgroup

import (
	"context"
	"errors"
	"path"

	"github.com/go-zookeeper/zk"
)

// The node operations below are what the adapters built on a Session
// (zkpublish, pinstore) need. go-zookeeper's calls take no context and wait
// out a disconnection, so each call runs in its own goroutine and returns at
// ctx's end; the abandoned goroutine ends when the connection answers or is
// closed (Close). Errors are go-zookeeper's (zk.ErrNoNode, zk.ErrBadVersion,
// ...), unwrapped, so callers can test them with errors.Is.

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
	_, err := do(ctx, func() (struct{}, error) {
		_, err := s.conn.Set(p, data, version)
		return struct{}{}, err
	})
	return err
}

// Create creates the persistent node p holding data, and its missing
// parents, with the session's ACL (Config.ACL). It fails with zk.ErrNodeExists if p
// exists.
func (s *Session) Create(ctx context.Context, p string, data []byte) error {
	_, err := do(ctx, func() (struct{}, error) {
		if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
			return struct{}{}, err
		}
		_, err := s.conn.Create(p, data, 0, s.acl)
		return struct{}{}, err
	})
	return err
}

// CreatePrivate is Create for a node that holds secrets: the node (not its
// parents) is readable and writable by the session's own identity
// (Config.ACL's Writer) only, never by the ACL's readers. Without a Writer
// identity nodes are open, as for Create.
func (s *Session) CreatePrivate(ctx context.Context, p string, data []byte) error {
	_, err := do(ctx, func() (struct{}, error) {
		if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
			return struct{}{}, err
		}
		_, err := s.conn.Create(p, data, 0, s.secret)
		return struct{}{}, err
	})
	return err
}

// Put writes data to the persistent node p, creating it and its parents
// (with the session's ACL) when missing. It retries a few times when a concurrent deletion of a
// parent gets in between.
func (s *Session) Put(ctx context.Context, p string, data []byte) error {
	_, err := do(ctx, func() (struct{}, error) {
		for range 3 {
			if _, err := s.conn.Set(p, data, -1); !errors.Is(err, zk.ErrNoNode) {
				return struct{}{}, err
			}
			if err := ensurePath(s.conn, path.Dir(p), s.acl); err != nil {
				return struct{}{}, err
			}
			if _, err := s.conn.Create(p, data, 0, s.acl); !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) {
				return struct{}{}, err
			}
		}
		return struct{}{}, zk.ErrNoNode
	})
	return err
}

// Delete deletes node p if its version is version (-1: any).
func (s *Session) Delete(ctx context.Context, p string, version int32) error {
	_, err := do(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(p, version) })
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
