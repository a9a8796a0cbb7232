package hotwatch

import (
	"bytes"
	"log/slog"
	"maps"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/rules"
)

// shardState is what the watcher knows of one shard of an app: of its node
// <root>/hot/<app>/<shard>, or of its lease and part nodes when it is
// followed through them.
type shardState struct {
	raw []byte // the shard node's data as last read; a change is a difference in bytes
	// parts are the lease and part nodes as last read, when the shard is
	// followed through them (raw is then nil), and decoded each part node
	// as last decoded.
	parts   map[string][]byte
	decoded map[string]*hotset.Part
	keys    []hotset.Key // nil when the node is invalid or expired
	expiry  time.Time    // local time after which keys stop counting; zero when keys is nil
	ttl     time.Duration
}

// appState is the set of shard nodes of one app. The operators' pins node
// is one of them (its keys carry Source "pinned"); the blocks node is kept
// apart: its keys are never hot.
type appState struct {
	shards    map[string]*shardState // by escaped shard node name
	blocks    map[string]bool
	blocksRaw []byte
}

// update applies a full read of app's shard nodes (nil data: not read, see
// parts) and of the lease and part nodes of the shards followed through
// them (parts, by shard node name), received at at (local clock), and
// reports whether anything that counts changed. A shard node that was not
// read and has no parts keeps what it had: it is being followed anew.
func (a *appState) update(nodes map[string][]byte, parts map[string]map[string][]byte, at time.Time, log *slog.Logger, m *metrics) bool {
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
		if name == hotset.BlocksNode || parts[name] != nil || data == nil {
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
	for name, pn := range parts {
		old := a.shards[name]
		if old != nil && old.parts != nil && maps.EqualFunc(old.parts, pn, bytes.Equal) {
			continue // unchanged: its TTL keeps running from when it was last seen changed
		}
		st := fromParts(old, pn, at, log, m)
		if a.shards == nil {
			a.shards = map[string]*shardState{}
		}
		a.shards[name] = st
		changed = changed || st.keys != nil || (old != nil && old.keys != nil)
	}
	for name, st := range a.shards {
		if _, ok := nodes[name]; !ok && parts[name] == nil {
			delete(a.shards, name)
			changed = changed || st.keys != nil
		}
	}
	return changed
}

// fromParts returns the state of a shard followed through its lease and part
// nodes pn (the lease valid and every part present: the watcher checks),
// which changed since old at at. Only the parts whose bytes changed are
// decoded; a part that does not decode keeps what it had. A key's rate is
// the lease's when the lease is for the part's generation, else the part's.
// A write of any node of the shard renews it, as a write of its shard node
// does.
func fromParts(old *shardState, pn map[string][]byte, at time.Time, log *slog.Logger, m *metrics) *shardState {
	st := &shardState{parts: map[string][]byte{}, decoded: map[string]*hotset.Part{}}
	for n, data := range pn {
		st.parts[n] = bytes.Clone(data)
	}
	l, err := hotset.DecodeLease(pn[hotset.LeaseNode])
	if err != nil { // the watcher checked it; be safe
		m.invalid.Inc()
		return st
	}
	keys := []hotset.Key{}
	for i := range l.Parts {
		n := hotset.PartName(i)
		var p *hotset.Part
		if old != nil && old.decoded != nil {
			p = old.decoded[n]
		}
		if p == nil || old == nil || !bytes.Equal(old.parts[n], pn[n]) {
			if np, err := hotset.DecodePart(pn[n]); err != nil {
				m.invalid.Inc()
				log.Warn("hotwatch: ignoring a part node", "shard", l.Shard, "part", n, "err", err)
			} else {
				p = np
			}
		}
		if p == nil {
			continue
		}
		st.decoded[n] = p
		if l.Gen[i] == p.Gen && len(l.Rates[i]) == len(p.Keys) {
			for j, k := range p.Keys {
				k.Rate = l.Rates[i][j]
				keys = append(keys, k)
			}
		} else {
			keys = append(keys, p.Keys...)
		}
	}
	if old == nil && (&hotset.Shard{Updated: l.Updated, TTL: l.TTL}).Expired(at) {
		m.expired.Inc() // as for a shard node read for the first time
		return st
	}
	st.keys, st.ttl = keys, time.Duration(l.TTL)*time.Millisecond
	st.expiry = at.Add(st.ttl)
	return st
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
