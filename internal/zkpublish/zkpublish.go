package zkpublish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// Config tunes a Publisher. A zero field means its default.
type Config struct {
	Root   string       // ZooKeeper root; "" means hotset.DefaultRoot
	Logger *slog.Logger // nil discards
}

// Publisher writes one aggregator shard's hot set and membership through a
// zkgroup.Session. It is safe for concurrent use.
type Publisher struct {
	s    *zkgroup.Session
	root string
	log  *slog.Logger
}

// New returns a Publisher that uses s.
func New(s *zkgroup.Session, cfg Config) (*Publisher, error) {
	if s == nil {
		return nil, errors.New("zkpublish: nil Session")
	}
	root := cmp.Or(cfg.Root, hotset.DefaultRoot)
	if !path.IsAbs(root) || path.Clean(root) != root {
		return nil, fmt.Errorf("zkpublish: root %q must be a clean absolute path", root)
	}
	return &Publisher{s: s, root: root, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}, nil
}

// Publish writes s to <root>/hot/<app>/<shard>, creating the node and its
// parents when missing.
func (p *Publisher) Publish(ctx context.Context, s *hotset.Shard) error {
	data, err := hotset.Encode(s)
	if err != nil {
		return err
	}
	node := hotset.ShardPath(p.root, s.App, s.Shard)
	if err := p.s.Put(ctx, node, data); err != nil {
		return fmt.Errorf("zkpublish: write %s: %w", node, err)
	}
	return nil
}

// Remove deletes app's node of shard. A missing node is not an error.
func (p *Publisher) Remove(ctx context.Context, app, shard string) error {
	node := hotset.ShardPath(p.root, app, shard)
	err := p.s.Delete(ctx, node, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zkpublish: delete %s: %w", node, err)
	}
	return nil
}

// Load returns the nodes shard wrote, one per app. Nodes that do not decode
// are skipped and logged.
func (p *Publisher) Load(ctx context.Context, shard string) ([]*hotset.Shard, error) {
	apps, err := p.children(ctx, hotset.HotDir(p.root))
	if err != nil {
		return nil, err
	}
	var out []*hotset.Shard
	for _, app := range apps {
		node := path.Join(hotset.HotDir(p.root), app, hotset.Escape(shard))
		data, _, err := p.get(ctx, node)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			return nil, err
		}
		s, err := hotset.Decode(data)
		if err != nil {
			p.log.Warn("skipping shard node", "path", node, "err", err)
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// Collect deletes the shard nodes of aggregators that are not members and
// that are older than olderThan (and than twice their own TTL), then the app
// folders left empty. Only the member with the smallest id collects, so N
// aggregators do not all scan the tree; when self is not that member, it
// returns 0 at the cost of one read.
func (p *Publisher) Collect(ctx context.Context, self string, olderThan time.Duration) (int, error) {
	names, err := p.children(ctx, hotset.AggregatorsDir(p.root))
	if err != nil {
		return 0, err
	}
	live := map[string]bool{self: true}
	for _, n := range names {
		id, err := hotset.Unescape(n)
		if err != nil {
			id = n
		}
		live[id] = true
	}
	if first := slices.Min(slices.Collect(maps.Keys(live))); first != self {
		return 0, nil
	}
	apps, err := p.children(ctx, hotset.HotDir(p.root))
	if err != nil {
		return 0, err
	}
	deleted := 0
	now := time.Now()
	for _, app := range apps {
		dir := path.Join(hotset.HotDir(p.root), app)
		shards, err := p.children(ctx, dir)
		if err != nil {
			return deleted, err
		}
		left := len(shards)
		for _, name := range shards {
			id, err := hotset.Unescape(name)
			if err != nil || live[id] {
				continue
			}
			ok, err := p.collectNode(ctx, path.Join(dir, name), now, olderThan)
			if err != nil {
				return deleted, err
			}
			if ok {
				deleted++
				left--
			}
		}
		if left == 0 {
			// Fails harmlessly (ErrNotEmpty, ErrNoNode) if a shard just wrote here.
			_ = p.s.Delete(ctx, dir, -1)
		}
	}
	return deleted, nil
}

// collectNode deletes node if it is old enough, unless it changed since read.
func (p *Publisher) collectNode(ctx context.Context, node string, now time.Time, olderThan time.Duration) (bool, error) {
	data, stat, err := p.get(ctx, node)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	last := time.UnixMilli(stat.Mtime)
	bound := olderThan
	if s, err := hotset.Decode(data); err == nil {
		if u := time.UnixMilli(s.Updated); u.After(last) {
			last = u
		}
		bound = max(bound, 2*time.Duration(s.TTL)*time.Millisecond)
	}
	if now.Sub(last) <= bound {
		return false, nil
	}
	err = p.s.Delete(ctx, node, stat.Version)
	switch {
	case err == nil:
		p.log.Info("deleted node of a departed shard", "path", node, "updated", last)
		return true, nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return false, nil // deleted by someone else, or renewed: its shard is back
	default:
		return false, fmt.Errorf("zkpublish: delete %s: %w", node, err)
	}
}

// Join registers m under <root>/members/aggregators/<escaped id> until ctx
// ends (zkgroup.Session.Join), then deregisters and returns nil.
func (p *Publisher) Join(ctx context.Context, m hotset.Member) error {
	err := p.s.Join(ctx, hotset.AggregatorsDir(p.root), hotset.Escape(m.ID), hotset.EncodeMember(m))
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("zkpublish: join: %w", err)
}

func (p *Publisher) children(ctx context.Context, dir string) ([]string, error) {
	names, err := p.s.Children(ctx, dir)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("zkpublish: list %s: %w", dir, err)
	}
	return names, nil
}

func (p *Publisher) get(ctx context.Context, node string) ([]byte, *zk.Stat, error) {
	data, stat, err := p.s.Get(ctx, node)
	if err != nil {
		return nil, nil, fmt.Errorf("zkpublish: read %s: %w", node, err)
	}
	return data, stat, nil
}
