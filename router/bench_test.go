package router_test

import (
	"fmt"
	"testing"

	"github.com/hotspot-dev/hotspot/router"
)

func benchRing(b *testing.B, n int) *router.Ring {
	b.Helper()
	nodes := make([]router.Node, n)
	for i := range nodes {
		nodes[i] = router.Node{ID: fmt.Sprintf("aggregator-%d", i), Addr: fmt.Sprintf("10.0.0.%d:7070", i)}
	}
	r, err := router.New(nodes, router.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// keys16 returns 16-byte keys; a power-of-two count so the loop masks.
func keys16(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("item:%011d", i*7919)
	}
	return keys
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{8, 32, 128} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := benchRing(b, n)
			keys := keys16(1 << 16)
			if len(keys[0]) != 16 {
				b.Fatalf("key length %d, want 16", len(keys[0]))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := r.Lookup(keys[i&(len(keys)-1)]); !ok {
					b.Fatal("empty ring")
				}
				i++
			}
		})
	}
}

func BenchmarkHash16(b *testing.B) {
	keys := keys16(1 << 10)
	b.ReportAllocs()
	var sink uint64
	i := 0
	for b.Loop() {
		sink += router.Hash(keys[i&(len(keys)-1)])
		i++
	}
	_ = sink
}

func BenchmarkLookupN3(b *testing.B) {
	r := benchRing(b, 32)
	keys := keys16(1 << 16)
	dst := make([]router.Node, 0, 3)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = r.LookupN(keys[i&(len(keys)-1)], 3, dst[:0])
		i++
	}
}

func BenchmarkNew(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchRing(b, n)
			}
		})
	}
}
