package bloomfilter_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotcache/bloomfilter"
)

var _ hotcache.KeyFilter = (*bloomfilter.Filter)(nil)

// TestFilter: a key added through the filter or before Wrap may be
// contained; of keys never added, about the configured share are false
// positives; concurrent Adds and MayContains are safe (run with -race).
func TestFilter(t *testing.T) {
	bf := bloom.NewWithEstimates(10_000, 0.01)
	bf.AddString("before")
	f := bloomfilter.Wrap(bf)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprintf("k%d-%d", g, i)
				f.Add(k)
				if !f.MayContain(k) {
					t.Errorf("MayContain(%q) = false right after Add", k)
					return
				}
			}
		})
	}
	wg.Wait()
	if !f.MayContain("before") {
		t.Error(`MayContain("before") = false for a key added before Wrap`)
	}
	fp := 0
	for i := range 10_000 {
		if f.MayContain(fmt.Sprint("absent", i)) {
			fp++
		}
	}
	if fp > 300 { // 1 % expected at capacity; 4 000 of 10 000 keys added
		t.Errorf("%d of 10000 absent keys may be contained, want about 1 %% at most", fp)
	}
}
