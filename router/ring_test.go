package router_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/hotspot-dev/hotspot/router"
)

// testKeys returns n keys shaped like cache keys ("user:123:profile").
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i) + ":profile"
	}
	return keys
}

var millionKeys = sync.OnceValue(func() []string { return testKeys(1_000_000) })

func mustNew(t testing.TB, nodes []router.Node, cfg router.Config) *router.Ring {
	t.Helper()
	r, err := router.New(nodes, cfg)
	if err != nil {
		t.Fatalf("New(%d nodes): %v", len(nodes), err)
	}
	return r
}

func nodeSet(prefix string, n int) []router.Node {
	nodes := make([]router.Node, n)
	for i := range nodes {
		nodes[i] = router.Node{ID: fmt.Sprintf("%s-%d", prefix, i), Addr: fmt.Sprintf("10.1.%d.%d:7070", i/250, i%250)}
	}
	return nodes
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []router.Node
		cfg   router.Config
		ok    bool
	}{
		{"empty ring", nil, router.Config{}, true},
		{"one node", []router.Node{{ID: "a"}}, router.Config{}, true},
		{"zero weight means one", []router.Node{{ID: "a", Weight: 0}}, router.Config{}, true},
		{"empty ID", []router.Node{{ID: "a"}, {ID: ""}}, router.Config{}, false},
		{"duplicate ID", []router.Node{{ID: "a", Addr: "x"}, {ID: "b"}, {ID: "a", Addr: "y"}}, router.Config{}, false},
		{"negative weight", []router.Node{{ID: "a", Weight: -1}}, router.Config{}, false},
		{"negative virtual nodes", []router.Node{{ID: "a"}}, router.Config{VirtualNodes: -1}, false},
		{"too many points", []router.Node{{ID: "a", Weight: 1 << 30}}, router.Config{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := router.New(tt.nodes, tt.cfg)
			if got := err == nil; got != tt.ok {
				t.Errorf("New: err = %v, want ok = %v", err, tt.ok)
			}
		})
	}
}

func TestEmptyRing(t *testing.T) {
	r := mustNew(t, nil, router.Config{})
	if n, ok := r.Lookup("k"); ok {
		t.Errorf("Lookup on empty ring = %+v, true; want false", n)
	}
	if got := r.LookupN("k", 3, nil); len(got) != 0 {
		t.Errorf("LookupN on empty ring = %v, want none", got)
	}
	if r.Len() != 0 {
		t.Errorf("Len = %d, want 0", r.Len())
	}
}

// TestGolden pins owners of a few keys. The ring is a cross-process (and
// cross-release) contract: if this test fails, the hash or the placement
// changed and every deployed detector would disagree with the new one.
func TestGolden(t *testing.T) {
	r := mustNew(t, []router.Node{{ID: "agg-a"}, {ID: "agg-b"}, {ID: "agg-c", Weight: 2}}, router.Config{})
	want := map[string]string{
		"":               "agg-c",
		"item:42":        "agg-a",
		"user:1:profile": "agg-c",
		"user:2:profile": "agg-c",
		"a":              "agg-c",
		"hot:key:000001": "agg-b",
		"hot:key:000002": "agg-b",
		"hot:key:000003": "agg-c",
		"sku-9":          "agg-b",
		"sku-10":         "agg-a",
	}
	for key, id := range want {
		if n, _ := r.Lookup(key); n.ID != id {
			t.Errorf("Lookup(%q) = %q, want %q", key, n.ID, id)
		}
	}
	// A wider fingerprint: keys per node over 100k keys.
	counts := map[string]int{}
	for _, k := range testKeys(100_000) {
		n, _ := r.Lookup(k)
		counts[n.ID]++
	}
	if wantCounts := map[string]int{"agg-a": 25409, "agg-b": 24850, "agg-c": 49741}; !maps.Equal(counts, wantCounts) {
		t.Errorf("keys per node = %v, want %v", counts, wantCounts)
	}
}

// TestPlacementDependsOnlyOnIDAndWeight: input order and Addr do not matter.
func TestPlacementDependsOnlyOnIDAndWeight(t *testing.T) {
	nodes := nodeSet("n", 12)
	nodes[3].Weight = 3
	base := mustNew(t, nodes, router.Config{})
	shuffled := slices.Clone(nodes)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for i := range shuffled {
		shuffled[i].Addr = "elsewhere:" + strconv.Itoa(i)
	}
	other := mustNew(t, shuffled, router.Config{})
	for _, key := range testKeys(20000) {
		a, _ := base.Lookup(key)
		b, _ := other.Lookup(key)
		if a.ID != b.ID {
			t.Fatalf("Lookup(%q): %q with one input order, %q with another", key, a.ID, b.ID)
		}
	}
	got := other.Nodes()
	if !slices.IsSortedFunc(got, func(a, b router.Node) int { return cmpString(a.ID, b.ID) }) {
		t.Errorf("Nodes() not sorted by ID: %v", got)
	}
	for _, n := range got {
		want := 1 // 0 is normalized to 1
		if n.ID == "n-3" {
			want = 3
		}
		if n.Weight != want {
			t.Errorf("Nodes(): %s has weight %d, want %d", n.ID, n.Weight, want)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestLookupN(t *testing.T) {
	r := mustNew(t, nodeSet("n", 5), router.Config{VirtualNodes: 64})
	tests := []struct{ n, want int }{{-1, 0}, {0, 0}, {1, 1}, {3, 3}, {5, 5}, {9, 5}}
	for _, key := range testKeys(500) {
		owner, _ := r.Lookup(key)
		all := r.LookupN(key, 5, nil)
		for _, tt := range tests {
			dst := []router.Node{{ID: "already-there"}}
			got := r.LookupN(key, tt.n, dst)
			if len(got) != 1+tt.want {
				t.Fatalf("LookupN(%q, %d) appended %d nodes, want %d", key, tt.n, len(got)-1, tt.want)
			}
			if got[0].ID != "already-there" {
				t.Fatalf("LookupN overwrote dst[0]: %v", got[0])
			}
			if !slices.Equal(got[1:], all[:tt.want]) {
				t.Fatalf("LookupN(%q, %d) = %v, want prefix of %v", key, tt.n, got[1:], all)
			}
		}
		if all[0] != owner {
			t.Fatalf("LookupN(%q)[0] = %v, Lookup = %v", key, all[0], owner)
		}
		ids := map[string]bool{}
		for _, n := range all {
			ids[n.ID] = true
		}
		if len(ids) != 5 {
			t.Fatalf("LookupN(%q, 5) = %v, want 5 distinct nodes", key, all)
		}
	}
	// More than 16 candidates take the bitset paths (stack up to 1024
	// nodes, heap above).
	for _, size := range []int{40, 1500} {
		big := mustNew(t, nodeSet("n", size), router.Config{VirtualNodes: 16})
		for _, key := range testKeys(20) {
			got := big.LookupN(key, size, nil)
			ids := map[string]bool{}
			for _, n := range got {
				ids[n.ID] = true
			}
			if len(got) != size || len(ids) != size {
				t.Fatalf("LookupN(%q, %d): %d nodes, %d distinct; want %d and %d", key, size, len(got), len(ids), size, size)
			}
			if first := big.LookupN(key, 7, nil); !slices.Equal(first, got[:7]) {
				t.Fatalf("LookupN(%q, 7) = %v, want prefix of LookupN(%d) %v", key, first, size, got[:7])
			}
			if first := big.LookupN(key, 30, nil); !slices.Equal(first, got[:30]) {
				t.Fatalf("LookupN(%q, 30) differs from the prefix of LookupN(%d)", key, size)
			}
		}
	}
}

func TestLookupNNoAlloc(t *testing.T) {
	tests := []struct{ nodes, n int }{{8, 4}, {40, 40}, {1024, 1024}}
	for _, tt := range tests {
		r := mustNew(t, nodeSet("n", tt.nodes), router.Config{VirtualNodes: 16})
		dst := make([]router.Node, 0, tt.n)
		allocs := testing.AllocsPerRun(20, func() {
			dst = r.LookupN("user:42:profile", tt.n, dst[:0])
			if _, ok := r.Lookup("user:42:profile"); !ok {
				t.Fatal("Lookup failed")
			}
		})
		if allocs != 0 {
			t.Errorf("%d nodes, n=%d: Lookup+LookupN allocate %v times per call, want 0", tt.nodes, tt.n, allocs)
		}
		if len(dst) != tt.n {
			t.Errorf("%d nodes, n=%d: got %d nodes", tt.nodes, tt.n, len(dst))
		}
	}
}

// spread returns stddev/mean of keys per node, and the largest count/mean.
func spread(r *router.Ring, keys []string) (cv, maxRatio float64) {
	counts := map[string]int{}
	for _, k := range keys {
		n, _ := r.Lookup(k)
		counts[n.ID]++
	}
	mean := float64(len(keys)) / float64(r.Len())
	var ss float64
	for _, n := range r.Nodes() {
		c := float64(counts[n.ID])
		ss += (c - mean) * (c - mean)
		maxRatio = max(maxRatio, c/mean)
	}
	return math.Sqrt(ss/float64(r.Len())) / mean, maxRatio
}

// TestBalance: with the default virtual-node count, 1M keys spread over 8
// and over 32 nodes with stddev/mean <= 5%.
func TestBalance(t *testing.T) {
	keys := millionKeys()
	for _, n := range []int{8, 32} {
		for _, prefix := range []string{"aggregator", "10.0.0.1:6379"} {
			r := mustNew(t, nodeSet(prefix, n), router.Config{})
			cv, mx := spread(r, keys)
			t.Logf("%d nodes %q: stddev/mean = %.2f%%, max/mean = %.3f", n, prefix, 100*cv, mx)
			if cv > 0.05 {
				t.Errorf("%d nodes %q: stddev/mean = %.2f%%, want <= 5%%", n, prefix, 100*cv)
			}
		}
	}
}

// TestWeights: a node's share of keys is proportional to its weight.
func TestWeights(t *testing.T) {
	nodes := []router.Node{{ID: "w0", Weight: 0}, {ID: "w1", Weight: 1}, {ID: "w2", Weight: 2}, {ID: "w3", Weight: 3}, {ID: "w5", Weight: 5}}
	weights := map[string]float64{"w0": 1, "w1": 1, "w2": 2, "w3": 3, "w5": 5}
	total := 12.0
	r := mustNew(t, nodes, router.Config{})
	keys := millionKeys()
	counts := map[string]int{}
	for _, k := range keys {
		n, _ := r.Lookup(k)
		counts[n.ID]++
	}
	for id, w := range weights {
		got := float64(counts[id]) / float64(len(keys))
		want := w / total
		if math.Abs(got-want)/want > 0.08 {
			t.Errorf("node %s (weight %v): share %.4f, want %.4f +- 8%%", id, w, got, want)
		}
	}
}

// moved returns the fraction of keys whose owner differs between a and b,
// failing if a moved key neither left nor reached node changed.
func moved(t *testing.T, a, b *router.Ring, keys []string, changed string) float64 {
	t.Helper()
	n := 0
	for _, k := range keys {
		x, _ := a.Lookup(k)
		y, _ := b.Lookup(k)
		if x.ID == y.ID {
			continue
		}
		if x.ID != changed && y.ID != changed {
			t.Fatalf("key %q moved %s -> %s although only %s changed", k, x.ID, y.ID, changed)
		}
		n++
	}
	return float64(n) / float64(len(keys))
}

// TestMinimalMovement: adding or removing one of N nodes moves only keys of
// that node, and at most 1.1/N of all keys, over several N and node sets.
func TestMinimalMovement(t *testing.T) {
	keys := millionKeys()[:300_000]
	worst := 0.0 // largest moved fraction times N
	defer func() { t.Logf("largest movement: %.3f/N", worst) }()
	for _, n := range []int{3, 5, 8, 16, 32} {
		for seed := range uint64(3) {
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			nodes := make([]router.Node, n)
			for i := range nodes {
				nodes[i] = router.Node{ID: fmt.Sprintf("node-%08x", rng.Uint32())}
			}
			base := mustNew(t, nodes, router.Config{})

			added := router.Node{ID: fmt.Sprintf("added-%08x", rng.Uint32())}
			grown := mustNew(t, append(slices.Clone(nodes), added), router.Config{})
			f, limit := moved(t, base, grown, keys, added.ID), 1.1/float64(n+1)
			worst = max(worst, f*float64(n+1))
			if f > limit {
				t.Errorf("N=%d seed=%d: adding a node moved %.4f of keys, want <= %.4f", n, seed, f, limit)
			}

			for range 2 {
				i := rng.IntN(n)
				shrunk := mustNew(t, slices.Delete(slices.Clone(nodes), i, i+1), router.Config{})
				f, limit := moved(t, base, shrunk, keys, nodes[i].ID), 1.1/float64(n)
				worst = max(worst, f*float64(n))
				if f > limit {
					t.Errorf("N=%d seed=%d: removing %s moved %.4f of keys, want <= %.4f", n, seed, nodes[i].ID, f, limit)
				}
			}
		}
	}
}

// TestWeightChangeMovesOnlyToThatNode: raising a weight adds points and keeps
// the old ones, so keys move only onto the re-weighted node.
func TestWeightChangeMovesOnlyToThatNode(t *testing.T) {
	nodes := nodeSet("n", 6)
	a := mustNew(t, nodes, router.Config{})
	nodes[2].Weight = 2
	b := mustNew(t, nodes, router.Config{})
	keys := millionKeys()[:100_000]
	f := moved(t, a, b, keys, nodes[2].ID)
	// Its share goes from 1/6 to 2/7: about 0.119 of the keys move.
	if want := 2.0/7 - 1.0/6; math.Abs(f-want) > 0.02 {
		t.Errorf("weight 1 -> 2 moved %.4f of keys, want about %.4f", f, want)
	}
}
