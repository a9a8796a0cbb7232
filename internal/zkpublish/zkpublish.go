package zkpublish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path"
	"slices"
	"sync"
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

	mu      sync.Mutex // guards written and gen
	written map[nodeID]*parts
	gen     uint64 // the last part generation handed out
}

type nodeID struct{ app, shard string }

// parts is what the Publisher last wrote of a shard's part nodes. After a
// restart nothing is known and the first Publish rewrites every part.
type parts struct {
	keys [hotset.NumParts][]hotset.Key // each part's keys as written, in order
	gen  [hotset.NumParts]uint64       // and its generation
	ok   [hotset.NumParts]bool         // false: unknown (never written, or the write failed)
	// lease is the Updated of the last lease written (0: none, or its
	// write failed), and rates the rates it carried, by key.
	lease int64
	rates map[string]float64
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
	// Generations start at the clock so that those of a restarted
	// Publisher do not repeat the ones its predecessor left in the parts.
	return &Publisher{s: s, root: root, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		written: map[nodeID]*parts{}, gen: uint64(time.Now().UnixNano())}, nil
}

// Publish writes s to its part nodes and lease (see hotset.Lease): the
// parts whose keys changed since the last Publish, then the lease if no
// part changed or it is due; and then, whole, to <root>/hot/<app>/<shard>
// for readers that do not follow the parts. It creates missing nodes and
// their parents.
func (p *Publisher) Publish(ctx context.Context, s *hotset.Shard) error {
	data, err := hotset.Encode(s)
	if err != nil {
		return err
	}
	if err := p.publishParts(ctx, s); err != nil {
		return err
	}
	node := hotset.ShardPath(p.root, s.App, s.Shard)
	if err := p.s.Put(ctx, node, data); err != nil {
		return fmt.Errorf("zkpublish: write %s: %w", node, err)
	}
	return nil
}

// publishParts writes the part nodes of s whose keys differ from what this
// Publisher last wrote (rates aside), then the lease with every key's rate,
// unless parts were written and no rate moved by more than hotset.RateMove
// since the last lease and that lease is less than TTL/4 old: a promotion
// costs a reader one part, a rate refresh or a renewal the lease (a reader
// takes the rates of a part newer than the lease from the part). Publishes
// of one shard do not overlap (the aggregator publishes from one
// goroutine); p.mu guards only the map and the generations.
func (p *Publisher) publishParts(ctx context.Context, s *hotset.Shard) error {
	id := nodeID{s.App, s.Shard}
	p.mu.Lock()
	w := p.written[id]
	if w == nil {
		w = &parts{}
		p.written[id] = w
	}
	p.mu.Unlock()
	dir := hotset.PartsShardDir(p.root, s.App, s.Shard)
	wrote := false
	for i, keys := range hotset.Split(s, hotset.NumParts) {
		if w.ok[i] && sameKeys(w.keys[i], keys) {
			continue
		}
		p.mu.Lock()
		p.gen++
		gen := p.gen
		p.mu.Unlock()
		data, err := hotset.EncodePart(gen, keys)
		if err != nil {
			return err
		}
		node := path.Join(dir, hotset.PartName(i))
		w.ok[i] = false // unknown until the write succeeds
		if err := p.s.Put(ctx, node, data); err != nil {
			return fmt.Errorf("zkpublish: write %s: %w", node, err)
		}
		w.keys[i], w.gen[i], w.ok[i], wrote = keys, gen, true, true
	}
	cur := make(map[string]float64, len(s.Keys))
	moved := w.lease == 0
	for _, k := range s.Keys {
		cur[k.Key] = k.Rate
		if r, ok := w.rates[k.Key]; ok && math.Abs(k.Rate-r) > hotset.RateMove*r {
			moved = true
		}
	}
	if wrote && !moved && s.Updated-w.lease < s.TTL/4 {
		return nil // the parts written are the renewal
	}
	l := hotset.Lease{App: s.App, Shard: s.Shard, Updated: s.Updated, TTL: s.TTL, Parts: hotset.NumParts,
		Gen: w.gen[:], Rates: make([][]float64, hotset.NumParts)}
	rates := make(map[string]float64, len(s.Keys))
	for i, keys := range w.keys {
		l.Rates[i] = make([]float64, len(keys))
		for j, k := range keys {
			l.Rates[i][j] = hotset.RoundRate(cur[k.Key])
			rates[k.Key] = l.Rates[i][j]
		}
	}
	data, err := hotset.EncodeLease(l)
	if err != nil {
		return err
	}
	node := path.Join(dir, hotset.LeaseNode)
	w.lease = 0
	if err := p.s.Put(ctx, node, data); err != nil {
		return fmt.Errorf("zkpublish: write %s: %w", node, err)
	}
	w.lease, w.rates = s.Updated, rates
	return nil
}

// sameKeys reports whether a part written with prev needs no rewrite for
// next: the same keys, each with the same since, source, rule and kind.
// Rates go in the lease.
func sameKeys(prev, next []hotset.Key) bool {
	if len(prev) != len(next) {
		return false
	}
	old := make(map[string]hotset.Key, len(prev))
	for _, k := range prev {
		old[k.Key] = k
	}
	for _, k := range next {
		p, ok := old[k.Key]
		switch {
		case !ok, p.Since != k.Since, p.Source != k.Source, p.Kind != k.Kind,
			(p.Rule == nil) != (k.Rule == nil), p.Rule != nil && *p.Rule != *k.Rule:
			return false
		}
	}
	return true
}

// Remove deletes app's node of shard and its part nodes. Missing nodes are
// not an error.
func (p *Publisher) Remove(ctx context.Context, app, shard string) error {
	p.mu.Lock()
	delete(p.written, nodeID{app, shard})
	p.mu.Unlock()
	node := hotset.ShardPath(p.root, app, shard)
	err := p.s.Delete(ctx, node, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zkpublish: delete %s: %w", node, err)
	}
	_, err = p.removeParts(ctx, hotset.PartsShardDir(p.root, app, shard), -1)
	return err
}

// removeParts deletes the part folder dir: its lease first, if its version
// is leaseVersion (-1: any), so that readers go back to the shard node
// before any part goes; then the parts and the folder. It reports false,
// having deleted nothing, if the lease changed since it was read (its shard
// is back).
func (p *Publisher) removeParts(ctx context.Context, dir string, leaseVersion int32) (bool, error) {
	lease := path.Join(dir, hotset.LeaseNode)
	err := p.s.Delete(ctx, lease, leaseVersion)
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		return false, nil
	case err != nil && !errors.Is(err, zk.ErrNoNode):
		return false, fmt.Errorf("zkpublish: delete %s: %w", lease, err)
	}
	names, err := p.children(ctx, dir)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		node := path.Join(dir, n)
		if err := p.s.Delete(ctx, node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return false, fmt.Errorf("zkpublish: delete %s: %w", node, err)
		}
	}
	// Fails harmlessly (ErrNotEmpty, ErrNoNode) if the shard just wrote here.
	_ = p.s.Delete(ctx, dir, -1)
	return true, nil
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
	// The shards' part folders go by the same rule; they are not counted,
	// each goes with (or shortly after) its shard node.
	return deleted, p.collectParts(ctx, live, now, olderThan)
}

// collectParts deletes the part folders of shards that are not live and
// whose lease is old enough by the rule of collectNode, then the app
// folders left empty. A part
// folder without a lease (its writer died while creating it) is judged by
// its own mtime.
func (p *Publisher) collectParts(ctx context.Context, live map[string]bool, now time.Time, olderThan time.Duration) error {
	apps, err := p.children(ctx, hotset.PartsDir(p.root))
	if err != nil {
		return err
	}
	for _, app := range apps {
		dir := path.Join(hotset.PartsDir(p.root), app)
		shards, err := p.children(ctx, dir)
		if err != nil {
			return err
		}
		left := len(shards)
		for _, name := range shards {
			id, err := hotset.Unescape(name)
			if err != nil || live[id] {
				continue
			}
			sdir := path.Join(dir, name)
			last, bound, version := time.Time{}, olderThan, int32(-1)
			data, stat, err := p.get(ctx, path.Join(sdir, hotset.LeaseNode))
			switch {
			case errors.Is(err, zk.ErrNoNode):
				if _, stat, err = p.get(ctx, sdir); err != nil {
					if errors.Is(err, zk.ErrNoNode) {
						continue
					}
					return err
				}
				last = time.UnixMilli(stat.Mtime)
			case err != nil:
				return err
			default:
				last, version = time.UnixMilli(stat.Mtime), stat.Version
				if l, err := hotset.DecodeLease(data); err == nil {
					if u := time.UnixMilli(l.Updated); u.After(last) {
						last = u
					}
					bound = max(bound, 2*time.Duration(l.TTL)*time.Millisecond)
				}
			}
			if now.Sub(last) <= bound {
				continue
			}
			ok, err := p.removeParts(ctx, sdir, version)
			if err != nil {
				return err
			}
			if ok {
				p.log.Info("deleted the parts of a departed shard", "path", sdir, "updated", last)
				left--
			}
		}
		if left == 0 {
			_ = p.s.Delete(ctx, dir, -1) // fails harmlessly if a shard just wrote here
		}
	}
	return nil
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
