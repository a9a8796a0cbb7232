package pinstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// The kinds of list: every call names one.
const (
	Pins   = "pins"   // keys held hot whatever their rate
	Blocks = "blocks" // keys never hot, pinned or not
)

// MaxKeys bounds one app's pins or blocks, well under ZooKeeper's node size.
const MaxKeys = 10_000

// ErrTooMany is returned by Add when the list is full.
var ErrTooMany = errors.New("pinstore: too many keys")

// Store reads and writes pins and blocks under one root.
type Store struct {
	s    *zkgroup.Session
	root string
}

// New returns a Store over s; root "" means hotset.DefaultRoot.
func New(s *zkgroup.Session, root string) *Store {
	if root == "" {
		root = hotset.DefaultRoot
	}
	return &Store{s: s, root: root}
}

func (st *Store) path(kind, app string) (string, error) {
	switch kind {
	case Pins:
		return hotset.PinsPath(st.root, app), nil
	case Blocks:
		return hotset.BlocksPath(st.root, app), nil
	}
	return "", fmt.Errorf("pinstore: unknown kind %q", kind)
}

// List returns app's pinned or blocked keys, sorted.
func (st *Store) List(ctx context.Context, kind, app string) ([]string, error) {
	p, err := st.path(kind, app)
	if err != nil {
		return nil, err
	}
	keys, _, _, err := st.read(ctx, p)
	return keys, err
}

// Add puts key in app's list; adding a key already there changes nothing.
func (st *Store) Add(ctx context.Context, kind, app, key string) error {
	return st.modify(ctx, kind, app, func(keys []string) ([]string, error) {
		if i, ok := slices.BinarySearch(keys, key); !ok {
			if len(keys) >= MaxKeys {
				return nil, fmt.Errorf("%w: %s of app %s already holds %d", ErrTooMany, kind, app, MaxKeys)
			}
			keys = slices.Insert(keys, i, key)
		}
		return keys, nil
	})
}

// Remove takes key out of app's list; removing a key not there changes nothing.
func (st *Store) Remove(ctx context.Context, kind, app, key string) error {
	return st.modify(ctx, kind, app, func(keys []string) ([]string, error) {
		if i, ok := slices.BinarySearch(keys, key); ok {
			keys = slices.Delete(keys, i, i+1)
		}
		return keys, nil
	})
}

// modify applies fn to the list and writes it back if it changed, retrying
// when another writer got in between.
func (st *Store) modify(ctx context.Context, kind, app string, fn func([]string) ([]string, error)) error {
	p, err := st.path(kind, app)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		keys, since, version, err := st.read(ctx, p)
		if err != nil {
			return err
		}
		before := slices.Clone(keys)
		if keys, err = fn(keys); err != nil {
			return err
		}
		if slices.Equal(before, keys) {
			return nil
		}
		switch {
		case len(keys) == 0:
			err = st.s.Delete(ctx, p, version)
		case version < 0:
			var data []byte
			if data, err = encode(kind, app, keys, since); err == nil {
				err = st.s.Create(ctx, p, data)
			}
		default:
			var data []byte
			if data, err = encode(kind, app, keys, since); err == nil {
				err = st.s.Set(ctx, p, data, version)
			}
		}
		if err == nil {
			return nil
		}
		conflict := errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode)
		if !conflict || attempt == 10 {
			return fmt.Errorf("pinstore: write %s: %w", p, err)
		}
	}
}

// read returns the sorted keys of node p, when each was added (Unix ms),
// and the node's version, -1 if it does not exist.
func (st *Store) read(ctx context.Context, p string) ([]string, map[string]int64, int32, error) {
	data, stat, err := st.s.Get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, -1, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("pinstore: read %s: %w", p, err)
	}
	sh, err := hotset.Decode(data)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("pinstore: %s: %w", p, err)
	}
	keys := make([]string, 0, len(sh.Keys))
	since := make(map[string]int64, len(sh.Keys))
	for _, k := range sh.Keys {
		keys = append(keys, k.Key)
		since[k.Key] = k.Since
	}
	slices.Sort(keys)
	return slices.Compact(keys), since, stat.Version, nil
}

// encode writes keys as an operator node; a key keeps the time it was added.
func encode(kind, app string, keys []string, since map[string]int64) ([]byte, error) {
	now := time.Now().UnixMilli()
	sh := &hotset.Shard{App: app, Shard: kind, Updated: now, TTL: hotset.PinTTL}
	for _, k := range keys {
		key := hotset.Key{Key: k, Since: cmp.Or(since[k], now)}
		if kind == Pins {
			key.Source = "pinned"
		}
		sh.Keys = append(sh.Keys, key)
	}
	return hotset.Encode(sh)
}
