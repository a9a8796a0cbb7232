package detector

import (
	"fmt"
	"testing"
)

// TestGroupsMergeTheClosest: cuts at more disjoint stretches of event time
// than maxGroups end in maxGroups groups, the closest merged, oldest first,
// with every count kept; a partition's cuts go to the groups of their own
// times, and counts without event times join the newest group.
func TestGroupsMergeTheClosest(t *testing.T) {
	f := &flusher{step: 100}
	// part is a partial of one cut per key, each n accesses at [oldest,
	// newest] (the last with a spread, as a worker answers).
	type c struct {
		key            string
		oldest, newest int64
	}
	part := func(cuts ...c) partial {
		var p partial
		for i, k := range cuts {
			p.counts = append(p.counts, Count{Key: k.key, N: 2})
			ct := cut{end: len(p.counts), oldest: k.oldest, newest: k.newest}
			if i < len(cuts)-1 {
				ct.n = 2
			} else {
				ct.spread = &spread{step: 100}
				if k.oldest > 0 {
					ct.spread.add(k.oldest, 1)
					ct.spread.add(k.newest, 1)
				}
			}
			p.cuts = append(p.cuts, ct)
		}
		return p
	}
	for range 2 { // twice: the second round reuses the first's groups
		f.parts = []partial{
			part(c{"e", 5000, 5050}),
			part(c{"a", 1000, 1000}, c{"d", 3000, 3100}), // cut at 1000 ms, then 3000–3100
			part(c{"b", 1200, 1250}),
			part(c{"c", 1300, 1399}), // after b with no step between them: the closest
			part(c{"f", 5050, 5099}), // overlaps e
			part(c{"untimed", 0, 0}),
		}
		f.group()
		var got []string
		for _, g := range f.groups {
			var keys []string
			for _, c := range g.counts {
				keys = append(keys, c.Key)
			}
			got = append(got, fmt.Sprintf("%d-%d %v %v", g.oldest, g.newest, keys, g.spread.weights()))
		}
		want := []string{
			"1000-1000 [a] [2]",
			"1200-1399 [b c] [2 2]",
			"3000-3100 [d] [1 1]",
			"5000-5099 [e f untimed] [4]",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("groups\n%v\nwant\n%v", got, want)
		}
	}
}
