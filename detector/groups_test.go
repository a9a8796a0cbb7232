package detector

import (
	"fmt"
	"testing"
)

// TestGroupsMergeTheClosest: partitions at more disjoint stretches of event
// time than maxGroups end in maxGroups groups, the closest merged, oldest
// first, with every count kept; partials without event times join the
// newest group.
func TestGroupsMergeTheClosest(t *testing.T) {
	f := &flusher{step: 100}
	part := func(key string, oldest, newest int64) partial {
		s := &spread{step: 100}
		s.add(oldest, 1)
		if newest != oldest {
			s.add(newest, 1)
		}
		return partial{counts: []Count{{Key: key, N: 2}}, oldest: oldest, newest: newest, spread: s}
	}
	for range 2 { // twice: the second round reuses the first's groups
		f.parts = []partial{
			part("e", 5000, 5050),
			part("a", 1000, 1000),
			part("b", 1200, 1250),
			part("c", 1300, 1399), // after b with no step between them: the closest
			part("d", 3000, 3100),
			part("f", 5050, 5099), // overlaps e
			{counts: []Count{{Key: "untimed", N: 2}}},
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
			"1000-1000 [a] [1]",
			"1200-1399 [b c] [2 2]",
			"3000-3100 [d] [1 1]",
			"5000-5099 [e f untimed] [4]",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("groups\n%v\nwant\n%v", got, want)
		}
	}
}
