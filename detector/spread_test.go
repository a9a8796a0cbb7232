package detector

import (
	"slices"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

func TestSpread(t *testing.T) {
	s := &spread{step: 100}
	if s.weights() != nil {
		t.Fatal("an empty spread has weights")
	}
	s.add(1_000_250, 3) // step 10002
	s.add(1_000_250, 2)
	s.add(1_000_420, 7) // 10004
	s.add(1_000_050, 1) // 10000: before the first, the weights grow in front
	if want := []uint64{1, 0, 5, 0, 7}; s.first != 10000 || !slices.Equal(s.weights(), want) {
		t.Fatalf("weights from step %d: %v, want from 10000: %v", s.first, s.weights(), want)
	}
	o := &spread{step: 100}
	o.add(1_000_599, 4) // 10005
	o.add(1_000_000, 6) // 10000
	s.merge(o)
	if want := []uint64{7, 0, 5, 0, 7, 4}; s.first != 10000 || !slices.Equal(s.weights(), want) {
		t.Fatalf("merged: weights from step %d: %v, want from 10000: %v", s.first, s.weights(), want)
	}
	s.reset()
	s.add(500, 1)
	if want := []uint64{1}; s.first != 5 || !slices.Equal(s.weights(), want) {
		t.Fatalf("after reset: weights from step %d: %v, want from 5: %v", s.first, s.weights(), want)
	}
	// A round longer than wire.MaxWeights steps sends none: the counts are
	// spread evenly, as before weights.
	s.add(500+100*wire.MaxWeights, 1)
	if s.weights() != nil {
		t.Fatalf("%d steps: weights %d, want none", wire.MaxWeights+1, len(s.weights()))
	}
	o.reset()
	o.add(500, 1)
	o.merge(s)
	if o.weights() != nil {
		t.Fatal("merged with an overlong spread: weights, want none")
	}
}

// BenchmarkSpreadAdd measures what a worker pays per counted entry to keep
// the round's weights: entries of a record share its time.
func BenchmarkSpreadAdd(b *testing.B) {
	s := &spread{step: 100}
	ms := int64(1_700_000_000_000)
	i := 0
	for b.Loop() {
		if i++; i%1000 == 0 { // a new record
			ms++
			if ms%1000 == 0 {
				s.reset()
			}
		}
		s.add(ms, 1)
	}
}
