package router

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// DefaultVirtualNodes is the number of ring points per unit of weight when
// Config.VirtualNodes is 0. A node's share of the ring is a sum of V random
// arcs, so its relative spread is about 1/sqrt(V): 2048 points keep the
// stddev/mean of keys per node near 2% (worst 2.8% over 20 node sets) at 8
// and at 32 nodes, and no node above 1.07 times the mean (docs/router.md).
const DefaultVirtualNodes = 2048

// maxPoints bounds the ring's size (weights times virtual nodes summed over
// all nodes) so that a typo in a weight cannot make New allocate gigabytes.
const maxPoints = 1 << 22

// Node is one owner of keys on the ring.
type Node struct {
	ID     string // stable identity; placement depends only on ID and Weight
	Addr   string // where to reach it; not used for placement
	Weight int    // relative share of keys; 0 means 1
}

// Config tunes a Ring.
type Config struct {
	VirtualNodes int // ring points per unit of weight; 0 means DefaultVirtualNodes
}

// Ring maps keys to nodes by consistent hashing. It is immutable, so any
// number of goroutines may use it without locks.
//
// Invariant: which node owns a key depends only on the key and on the set of
// (ID, Weight) pairs, never on the order of the nodes passed to New, on Addr,
// or on the process, so every Hotspot process agrees on it.
type Ring struct {
	nodes  []Node   // sorted by ID
	points []vpoint // ring positions, ascending, each with its owner's index in nodes

	// index[b] is the first i with points[i]>>shift >= b, for b in
	// [0, 1<<(64-shift)]: a key's bucket narrows the search to about one
	// point, so Lookup costs two memory reads instead of a binary search.
	index []uint32
	shift uint
}

// New builds a ring of nodes. It returns an error if an ID is empty or
// repeated, a weight is negative, or the ring would exceed 4M points.
func New(nodes []Node, cfg Config) (*Ring, error) {
	if cfg.VirtualNodes < 0 {
		return nil, fmt.Errorf("router: VirtualNodes %d must be >= 0", cfg.VirtualNodes)
	}
	vnodes := cmp.Or(cfg.VirtualNodes, DefaultVirtualNodes)
	r := &Ring{nodes: slices.Clone(nodes)}
	total := 0
	for i := range r.nodes {
		n := &r.nodes[i]
		switch {
		case n.ID == "":
			return nil, errors.New("router: node with empty ID")
		case n.Weight < 0:
			return nil, fmt.Errorf("router: node %q: negative weight %d", n.ID, n.Weight)
		}
		n.Weight = cmp.Or(n.Weight, 1)
		if n.Weight > maxPoints/vnodes || total+n.Weight*vnodes > maxPoints {
			return nil, fmt.Errorf("router: more than %d ring points (weights x %d virtual nodes)", maxPoints, vnodes)
		}
		total += n.Weight * vnodes
	}
	slices.SortFunc(r.nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(r.nodes); i++ {
		if r.nodes[i].ID == r.nodes[i-1].ID {
			return nil, fmt.Errorf("router: duplicate node ID %q", r.nodes[i].ID)
		}
	}

	vps := make([]vpoint, 0, total)
	for i, n := range r.nodes {
		base := Hash(n.ID)
		for v := range n.Weight * vnodes {
			vps = append(vps, vpoint{point(base, v), int32(i)})
		}
	}
	// Ties (two points at one position) go to the smaller ID: vps is in
	// owner order (nodes are sorted by ID) and the sort is stable, so the
	// order is the same in every process.
	vps = radixSort(vps)
	r.points = vps
	r.buildIndex()
	return r, nil
}

type vpoint struct {
	pos   uint64
	owner int32
}

// radixSort sorts vps by pos, stably: eight passes of a byte each, about
// five times faster than a comparison sort for the ring's 10^4-10^5 points.
func radixSort(vps []vpoint) []vpoint {
	if len(vps) < 2 {
		return vps
	}
	tmp := make([]vpoint, len(vps))
	for shift := uint(0); shift < 64; shift += 8 {
		var count [257]int
		for _, p := range vps {
			count[int(byte(p.pos>>shift))+1]++
		}
		if count[int(byte(vps[0].pos>>shift))+1] == len(vps) {
			continue // every point has the same byte here
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, p := range vps {
			b := byte(p.pos >> shift)
			tmp[count[b]] = p
			count[b]++
		}
		vps, tmp = tmp, vps
	}
	return vps
}

func (r *Ring) buildIndex() {
	if len(r.points) == 0 {
		return
	}
	// About one point per bucket, capped at 2^20 buckets (4 MiB of index).
	k := min(bits.Len(uint(len(r.points)-1)), 20)
	r.shift = uint(64 - k)
	if k == 0 {
		r.shift = 63 // two buckets; a shift of 64 would be legal but odd
		k = 1
	}
	nb := 1 << k
	r.index = make([]uint32, nb+1)
	i := 0
	for b := range nb {
		for i < len(r.points) && r.points[i].pos>>r.shift < uint64(b) {
			i++
		}
		r.index[b] = uint32(i)
	}
	r.index[nb] = uint32(len(r.points))
}

// search returns the index of the first point at or after h, wrapping to 0.
func (r *Ring) search(h uint64) int {
	b := h >> r.shift
	i, end := int(r.index[b]), int(r.index[b+1])
	for i < end && r.points[i].pos < h {
		i++
	}
	if i == len(r.points) {
		return 0
	}
	return i
}

// Lookup returns the node that owns key: the owner of the first point at or
// after Hash(key), clockwise. It returns false only for an empty ring.
func (r *Ring) Lookup(key string) (Node, bool) {
	if len(r.points) == 0 {
		return Node{}, false
	}
	return r.nodes[r.points[r.search(Hash(key))].owner], true
}

// LookupN appends to dst up to n distinct nodes for key in ring order: the
// owner first, then the owners of the next points clockwise that are not
// already listed (the usual choice of replicas or fallbacks). It appends
// min(n, Len()) nodes. It does not allocate when dst has room and the ring
// has at most 1024 nodes (or n <= 16).
func (r *Ring) LookupN(key string, n int, dst []Node) []Node {
	n = min(n, len(r.nodes))
	if n <= 0 {
		return dst
	}
	var small [16]int32 // owners listed so far, when n is small
	var bits [16]uint64 // owners listed so far, as a bitset of up to 1024 nodes
	var seen []uint64   // the bitset in use when n is not small
	if n > len(small) {
		seen = bits[:]
		if words := (len(r.nodes) + 63) / 64; words > len(bits) {
			seen = make([]uint64, words)
		}
	}
	got := 0
	for i := r.search(Hash(key)); got < n; {
		o := r.points[i].owner
		if seen != nil {
			if w, b := o/64, uint64(1)<<(o%64); seen[w]&b == 0 {
				seen[w] |= b
				dst = append(dst, r.nodes[o])
				got++
			}
		} else if !slices.Contains(small[:got], o) {
			small[got] = o
			dst = append(dst, r.nodes[o])
			got++
		}
		if i++; i == len(r.points) {
			i = 0
		}
	}
	return dst
}

// Nodes returns a copy of the ring's nodes sorted by ID, with weights
// normalized (0 became 1).
func (r *Ring) Nodes() []Node { return slices.Clone(r.nodes) }

// Len returns the number of nodes.
func (r *Ring) Len() int { return len(r.nodes) }
