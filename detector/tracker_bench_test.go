package detector

import (
	"fmt"
	"testing"

	"github.com/axiomhq/hyperloglog"
	"github.com/cespare/xxhash/v2"
)

// BenchmarkTracker measures a tracked key's source table as hotspot bench
// --sources 100 drives it: add is one access from one of 100 sources;
// report is a second's report of them (top 16, total and sketch).
func BenchmarkTracker(b *testing.B) {
	refs := make([]srcRef, 100)
	for i := range refs {
		refs[i].b = fmt.Appendf(nil, "inst-%d", i)
		refs[i].h = xxhash.Sum64(refs[i].b)
	}
	newTracker := func() *srcTracker {
		t := &srcTracker{}
		t.hll, _ = hyperloglog.NewSketch(sketchPrecision, false)
		return t
	}
	b.Run("add", func(b *testing.B) {
		t := newTracker()
		i := 0
		for b.Loop() {
			t.add(&refs[i%len(refs)], 1)
			i++
		}
	})
	b.Run("report", func(b *testing.B) {
		t := newTracker()
		b.ReportAllocs()
		for b.Loop() {
			for i := range refs {
				t.add(&refs[i], uint64(i+1))
			}
			_ = t.report("shop", "item:42")
		}
	})
}
