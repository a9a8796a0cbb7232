package rulestore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

// ErrConflict is returned by Put and Delete when the version they name is
// not the stored one.
var ErrConflict = errors.New("rulestore: version conflict")

// ErrNoApp is returned for an empty app name.
var ErrNoApp = errors.New("rulestore: no app")

// Store reads and writes rule lists under one root.
type Store struct {
	s    *zkgroup.Session
	root string
}

// New returns a Store over s; root "" means hotset.DefaultRoot. Nodes it
// creates carry s's ACL (zkgroup.Config.ACL): with digest auth, writable by
// hotspotd's identity only and readable by the apps.
func New(s *zkgroup.Session, root string) *Store {
	if root == "" {
		root = hotset.DefaultRoot
	}
	return &Store{s: s, root: root}
}

// Get returns app's stored list with its version; an app without a node has
// an empty list and version 0.
func (st *Store) Get(ctx context.Context, app string) (*rules.List, error) {
	if app == "" {
		return nil, ErrNoApp
	}
	p := hotset.RulesPath(st.root, app)
	data, stat, err := st.s.Get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return &rules.List{App: app, Rules: []rules.Rule{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rulestore: read %s: %w", p, err)
	}
	l, err := rules.DecodeNode(data)
	if err != nil {
		return nil, fmt.Errorf("rulestore: %s: %w", p, err)
	}
	l.App, l.Version = app, int64(stat.Version)+1
	return l, nil
}

// Put stores l as l.App's list if l.Version is the stored version: 0
// creates the node and fails if one exists; v > 0 replaces the list of
// version v. Any other version fails with ErrConflict. A list that fails
// its Check is refused with its *rules.Error. Put returns the stored list
// with its new version.
func (st *Store) Put(ctx context.Context, l *rules.List) (*rules.List, error) {
	if l.App == "" {
		return nil, ErrNoApp
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	data, err := rules.EncodeNode(l)
	if err != nil {
		return nil, err
	}
	p := hotset.RulesPath(st.root, l.App)
	switch v := l.Version; {
	case v == 0:
		err = st.s.Create(ctx, p, data)
	case v > 0 && v <= math.MaxInt32+1:
		// A successful compare-and-set moves the node from version
		// v-1 to v, so the new list's version is v+1.
		err = st.s.Set(ctx, p, data, int32(v-1))
	default:
		return nil, fmt.Errorf("%w: version %d of app %q", ErrConflict, v, l.App)
	}
	switch {
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		return nil, fmt.Errorf("%w: version %d of app %q is not the stored one", ErrConflict, l.Version, l.App)
	case err != nil:
		return nil, fmt.Errorf("rulestore: write %s: %w", p, err)
	}
	out := &rules.List{App: l.App, Version: l.Version + 1, Rules: l.Rules}
	if out.Rules == nil {
		out.Rules = []rules.Rule{}
	}
	return out, nil
}

// Delete removes app's list, so its keys follow the default rule. Version
// 0 deletes whatever is stored (nothing stored is not an error); v > 0
// deletes only the list of version v, else ErrConflict.
func (st *Store) Delete(ctx context.Context, app string, version int64) error {
	if app == "" {
		return ErrNoApp
	}
	p := hotset.RulesPath(st.root, app)
	var err error
	switch {
	case version == 0:
		if err = st.s.Delete(ctx, p, -1); errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	case version > 0 && version <= math.MaxInt32+1:
		err = st.s.Delete(ctx, p, int32(version-1))
	default:
		return fmt.Errorf("%w: version %d of app %q", ErrConflict, version, app)
	}
	switch {
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: version %d of app %q is not the stored one", ErrConflict, version, app)
	case err != nil:
		return fmt.Errorf("rulestore: delete %s: %w", p, err)
	}
	return nil
}
