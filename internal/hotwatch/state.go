package hotwatch

import (
	"bytes"
	"log/slog"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/rules"
)

// shardState is what the watcher knows of one <root>/hot/<app>/<shard> node.
type shardState struct {
	raw    []byte       // data as last read; a change is a difference in bytes
	keys   []hotset.Key // nil when the node is invalid or expired
	expiry time.Time    // local time after which keys stop counting; zero when keys is nil
	ttl    time.Duration
}

// appState is the set of shard nodes of one app. The operators' pins node
// is one of them (its keys carry Source "pinned"); the blocks node is kept
// apart: its keys are never hot.
type appState struct {
	shards    map[string]*shardState // by escaped shard node name
	blocks    map[string]bool
	blocksRaw []byte
}

// update applies a full read of app's shard nodes received at at (local
// clock) and reports whether anything that counts changed.
func (a *appState) update(nodes map[string][]byte, at time.Time, log *slog.Logger, m *metrics) bool {
	changed := false
	if data := nodes[hotset.BlocksNode]; !bytes.Equal(data, a.blocksRaw) {
		a.blocksRaw, a.blocks = bytes.Clone(data), nil
		if data != nil {
			if sh, err := hotset.Decode(data); err != nil {
				m.invalid.Inc()
				log.Warn("hotwatch: ignoring the blocks node", "err", err)
			} else {
				a.blocks = make(map[string]bool, len(sh.Keys))
				for _, k := range sh.Keys {
					a.blocks[k.Key] = true
				}
			}
		}
		changed = true
	}
	for name, data := range nodes {
		if name == hotset.BlocksNode {
			continue
		}
		old := a.shards[name]
		if old != nil && bytes.Equal(old.raw, data) {
			continue // unchanged: its TTL keeps running from when it was last seen changed
		}
		st := &shardState{raw: bytes.Clone(data)}
		sh, err := hotset.Decode(data)
		switch {
		case err != nil:
			m.invalid.Inc()
			log.Warn("hotwatch: ignoring shard node", "shard", name, "err", err)
		case sh.TTL <= 0:
			m.invalid.Inc()
			log.Warn("hotwatch: ignoring shard node without a TTL", "shard", name, "ttl_ms", sh.TTL)
		case old == nil && sh.Expired(at):
			// First read of a node nobody renewed within its TTL: an old
			// leftover (e.g. of a dead aggregator before our restart).
			m.expired.Inc()
		default:
			st.keys, st.ttl = sh.Keys, time.Duration(sh.TTL)*time.Millisecond
			st.expiry = at.Add(st.ttl)
		}
		if a.shards == nil {
			a.shards = map[string]*shardState{}
		}
		a.shards[name] = st
		changed = changed || st.keys != nil || (old != nil && old.keys != nil)
	}
	for name, st := range a.shards {
		if _, ok := nodes[name]; !ok {
			delete(a.shards, name)
			changed = changed || st.keys != nil
		}
	}
	return changed
}

// expire drops the keys of shards whose expiry is not after now and returns
// how many shards it dropped.
func (a *appState) expire(now time.Time) int {
	n := 0
	for _, st := range a.shards {
		if st.keys != nil && !now.Before(st.expiry) {
			st.keys, st.expiry = nil, time.Time{}
			n++
		}
	}
	return n
}

// restart makes the TTL of every live shard run from at at the earliest:
// after a disconnection, nobody could have renewed them.
func (a *appState) restart(at time.Time) {
	for _, st := range a.shards {
		if st.keys != nil {
			st.expiry = later(st.expiry, at.Add(st.ttl))
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// nextExpiry returns the earliest expiry among live shards, or zero.
func (a *appState) nextExpiry() time.Time {
	var next time.Time
	for _, st := range a.shards {
		if st.keys != nil && (next.IsZero() || st.expiry.Before(next)) {
			next = st.expiry
		}
	}
	return next
}

// merged returns app's keys merged over its live shards: the highest rate,
// the earliest since, "pinned" if any shard pins the key, and the rule and
// kind of the strongest kind (see mergeReason). A blocked key is left out,
// pinned or not.
func (a *appState) merged() map[string]hotset.Key {
	out := map[string]hotset.Key{}
	for _, st := range a.shards {
		for _, k := range st.keys {
			if a.blocks[k.Key] {
				continue
			}
			cur, ok := out[k.Key]
			if !ok {
				out[k.Key] = k
				continue
			}
			if k.Rate > cur.Rate {
				cur.Rate = k.Rate
			}
			if k.Since != 0 && (cur.Since == 0 || k.Since < cur.Since) {
				cur.Since = k.Since
			}
			if k.Source == "pinned" {
				cur.Source = "pinned"
			}
			mergeReason(&cur, k)
			out[k.Key] = cur
		}
	}
	return out
}

// kindRank orders the kinds a key can be hot by: a key hot by writes in
// one shard is a write key (apps must not cache it), then bytes, then count.
func kindRank(kind string) int {
	switch kind {
	case string(rules.KindWrite):
		return 2
	case string(rules.KindBytes):
		return 1
	}
	return 0
}

// mergeReason gives cur the rule and kind of k when k's kind ranks higher,
// or ranks the same and k names a rule that cur does not, or a lower one, so
// that the merge does not depend on the order the shards are read in. A
// key in several shards (while its owner changes) keeps one reason.
func mergeReason(cur *hotset.Key, k hotset.Key) {
	rc, rk := kindRank(cur.Kind), kindRank(k.Kind)
	switch {
	case rk > rc:
	case rk < rc:
		return
	case k.Rule == nil:
		return
	case cur.Rule != nil && *cur.Rule <= *k.Rule:
		return
	}
	cur.Rule, cur.Kind = k.Rule, k.Kind
}

// sameReason reports whether a and b are hot by the same rule and kind.
func sameReason(a, b hotset.Key) bool {
	if (a.Rule == nil) != (b.Rule == nil) || a.Rule != nil && *a.Rule != *b.Rule {
		return false
	}
	return kindRank(a.Kind) == kindRank(b.Kind)
}

// diff returns the keys in next but not in prev, those in prev but not in
// next, and those in both whose rule or kind changed.
func diff(prev, next map[string]hotset.Key) (added []hotset.Key, removed []string, changed []hotset.Key) {
	for k, v := range next {
		p, ok := prev[k]
		switch {
		case !ok:
			added = append(added, v)
		case !sameReason(p, v):
			changed = append(changed, v)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			removed = append(removed, k)
		}
	}
	return added, removed, changed
}
