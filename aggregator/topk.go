package aggregator

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// Peers asks every aggregator shard (this one included) for its candidates
// of a top-K rule: internal/shardclient's Client implements it. Without
// Peers a shard cuts over its own keys only, which is right when it is the
// only shard.
type Peers interface {
	// RuleTop returns each answering shard's n busiest keys of app that
	// follow rule, with its hot keys of that rule, and an error naming the
	// shards that did not answer.
	RuleTop(ctx context.Context, app string, rule, n int) ([]shardapi.Top, error)
}

// stayFraction is the hysteresis at the K-th place of a top-K rule: a key in
// the set stays while its rate is at least this fraction of the K-th
// busiest rate, so a newcomer must beat the weakest member by about 5 % to
// take its place.
const stayFraction = 0.95

// cutTopK returns the keys of the top-k set given every shard's candidates,
// in which Hot marks the current members. Every shard that sees the same
// candidates reaches the same set: it depends on nothing else.
func cutTopK(cands []KeyState, k int) map[string]bool {
	c := slices.DeleteFunc(slices.Clone(cands), func(s KeyState) bool { return s.Rate <= 0 })
	slices.SortFunc(c, func(x, y KeyState) int {
		return cmp.Or(cmp.Compare(y.Rate, x.Rate), cmp.Compare(x.Key, y.Key))
	})
	in := make(map[string]bool, k)
	if len(c) <= k {
		for _, s := range c {
			in[s.Key] = true
		}
		return in
	}
	floor := stayFraction * c[k-1].Rate
	for _, s := range c { // members still close enough to the K-th place stay
		if len(in) == k {
			break
		}
		if s.Hot && s.Rate >= floor {
			in[s.Key] = true
		}
	}
	for _, s := range c { // the free places go to the busiest of the rest
		if len(in) == k {
			break
		}
		in[s.Key] = true
	}
	return in
}

// topRule returns up to n of app's busiest keys that follow rule at the
// last sweep, busiest first, and every hot key of the rule after them. It
// scans the app's keys once and keeps the n busiest in a bounded heap, so
// the table lock is held O(keys × log n), not for a sort of every key.
func (t *table) topRule(app string, rule, n int, now time.Time) []KeyState {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := t.apps[app]
	if as == nil || rule < 0 || rule >= len(as.rs.rule) || n <= 0 {
		return []KeyState{}
	}
	r := as.rs.rule[rule]
	// less orders by rate, then by key descending, so that the heap's root
	// is the entry that leaves first and ties resolve as the cut does.
	less := func(x, y *entry) bool { return x.rate < y.rate || x.rate == y.rate && x.key > y.key }
	h := make([]*entry, 0, n)
	var hot []*entry
	for _, e := range as.keys {
		if e.r != r {
			continue
		}
		if len(h) < n {
			h = append(h, e)
			for i := len(h) - 1; i > 0; { // sift up
				p := (i - 1) / 2
				if !less(h[i], h[p]) {
					break
				}
				h[p], h[i] = h[i], h[p]
				i = p
			}
			continue
		}
		if !less(h[0], e) {
			if e.hot {
				hot = append(hot, e)
			}
			continue
		}
		if h[0].hot {
			hot = append(hot, h[0])
		}
		h[0] = e
		for i := 0; ; { // sift down
			l, m := 2*i+1, i
			if l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if rr := l + 1; rr < len(h) && less(h[rr], h[m]) {
				m = rr
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	slices.SortFunc(h, func(x, y *entry) int { return cmp.Or(cmp.Compare(y.rate, x.rate), cmp.Compare(x.key, y.key)) })
	out := make([]KeyState, 0, len(h)+len(hot))
	for _, e := range slices.Concat(h, hot) {
		s := t.state(e, now)
		s.Rate = e.rate // the sweep's rate: every shard cuts on the same clock
		out = append(out, s)
	}
	return out
}

// topkRules returns the (app, rule) pairs of top-K rules with keys here.
func (t *table) topkRules() []topkRule {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []topkRule
	for _, as := range t.apps {
		for _, i := range as.rs.topk {
			out = append(out, topkRule{app: as.name, rs: as.rs, rule: i, k: as.rs.rule[i].eff.K})
		}
	}
	return out
}

type topkRule struct {
	app  string
	rs   *ruleSet
	rule int
	k    int
}

// applyCut makes this shard's keys of rule r hot or cold as the cut in
// says, and reports whether one turned hot. Nothing changes when the app's
// rules changed since the cut was taken, or while the detectors are
// stalled (their silence is not coldness).
func (t *table) applyCut(tr topkRule, in map[string]bool, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := t.apps[tr.app]
	if as == nil || as.rs != tr.rs || t.stalled {
		return false
	}
	r := tr.rs.rule[tr.rule]
	b := t.bucket(now)
	t.setReach(now)
	hot := false
	for key := range in {
		if e := as.keys[key]; e != nil && e.r == r {
			if !e.hot {
				hot = t.promote(e, now, min(b, t.evalEnd), 0) || hot
			}
			e.confirmed = now
		}
	}
	for key, e := range as.hot {
		if e.r == r && !in[key] && !now.Before(e.holdFrom) {
			t.demote(e, now)
		}
	}
	return hot
}

// peerView is the last answer of one shard for one top-K rule.
type peerView struct {
	keys []KeyState
	at   time.Time
}

type peerViewKey struct {
	shard, app string
	rule       int
}

// cutAll runs the top-K cut of every top-K rule with keys at this shard:
// it gathers every shard's candidates (a shard that does not answer
// counts with its last answer for up to PeerGrace), cuts, and applies the
// cut to this shard's keys. It runs on the top-K goroutine only, which
// owns views.
func (a *Aggregator) cutAll(ctx context.Context, views map[peerViewKey]peerView) {
	now := time.Now()
	hot := false
	for _, tr := range a.t.topkRules() {
		var cands []KeyState
		if a.cfg.Peers == nil {
			cands = a.t.topRule(tr.app, tr.rule, tr.k, now)
		} else {
			tops, err := a.cfg.Peers.RuleTop(ctx, tr.app, tr.rule, tr.k)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				a.log.Warn("top-K cut: some shards did not answer; using their last answers", "app", tr.app, "rule", tr.rule, "err", err)
			}
			answered := make(map[string]bool, len(tops))
			seen := make(map[string]bool)
			for _, tp := range tops {
				answered[tp.Shard] = true
				views[peerViewKey{tp.Shard, tr.app, tr.rule}] = peerView{keys: tp.Keys, at: now}
				for _, s := range tp.Keys {
					if !seen[s.Key] {
						seen[s.Key] = true
						cands = append(cands, s)
					}
				}
			}
			for vk, v := range views {
				if vk.app != tr.app || vk.rule != tr.rule || answered[vk.shard] {
					continue
				}
				if now.Sub(v.at) > a.cfg.PeerGrace {
					delete(views, vk)
					continue
				}
				for _, s := range v.keys { // fresh answers win: a key may have moved
					if !seen[s.Key] {
						seen[s.Key] = true
						cands = append(cands, s)
					}
				}
			}
		}
		if a.t.applyCut(tr, cutTopK(cands, tr.k), time.Now()) {
			hot = true
		}
	}
	for vk, v := range views {
		if now.Sub(v.at) > a.cfg.PeerGrace {
			delete(views, vk)
		}
	}
	if hot {
		a.wake()
	}
}

// topkLoop cuts every top-K rule every TopKInterval.
func (a *Aggregator) topkLoop(ctx context.Context) error {
	tick := time.NewTicker(a.cfg.TopKInterval)
	defer tick.Stop()
	views := make(map[peerViewKey]peerView)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		a.cutAll(ctx, views)
	}
}

// RuleTop returns up to n of app's busiest keys at this shard that follow
// its rule number rule, busiest first as of the last sweep, and every hot
// key of that rule after them: a shard's candidates for a top-K cut.
func (a *Aggregator) RuleTop(app string, rule, n int) []KeyState {
	return a.t.topRule(app, rule, min(n, rules.MaxK), time.Now())
}
