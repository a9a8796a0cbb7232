package loadgen

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkZipf measures one draw over a million keys.
func BenchmarkZipf(b *testing.B) {
	for _, s := range []float64{0.8, 1.1} {
		b.Run(fmt.Sprintf("s=%v", s), func(b *testing.B) {
			z, err := newZipf(1_000_000, s)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			var sum uint64
			for b.Loop() {
				sum += z.sample(r)
			}
			_ = sum
		})
	}
}

// BenchmarkStep measures the per-tick path (sampling, truth, encoding) at
// 200,000 events/s: one op is one 10 ms tick of 2,000 events; binary batches
// are encoded every tenth tick, as at run time.
func BenchmarkStep(b *testing.B) {
	for _, form := range []Form{FormBinary, FormNDJSON, FormJSON, FormCombined, FormMappedJSON} {
		for _, s := range []float64{0.8, 1.1} {
			b.Run(fmt.Sprintf("%s/s=%v", form, s), func(b *testing.B) {
				c := testConfig(b, Config{Form: form, Rate: 200_000, Skew: s,
					Flashes: []Flash{{Key: "item:hot", Rate: 5000}}})
				g, err := newGenerator(c, time.Now().UnixMilli())
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var i int64
				for b.Loop() {
					g.step(i)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(g.ticks*2050), "ns/event") // 2,000 background + 50 planted per tick
			})
		}
	}
}

// BenchmarkStepFlat measures the per-tick path of the 2 M events/s
// flash workload (binary, Zipf 0.2 over 100 M keys, so nearly every event
// is a key of its own in its 100 ms batch): one op is one 10 ms tick of
// 20,000 events.
func BenchmarkStepFlat(b *testing.B) {
	c := testConfig(b, Config{Form: FormBinary, Rate: 2_000_000, Keys: 100_000_000, Skew: 0.2})
	g, err := newGenerator(c, time.Now().UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		g.step(i)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(g.ticks*20_000), "ns/event")
}

// BenchmarkStepSources is BenchmarkStep (s=1.1) with sources: each event
// also draws its instance, and binary writes a batch per instance per
// flush.
func BenchmarkStepSources(b *testing.B) {
	for _, form := range []Form{FormBinary, FormNDJSON, FormCombined} {
		for _, n := range []int{16, 1000} {
			b.Run(fmt.Sprintf("%s/sources=%d", form, n), func(b *testing.B) {
				c := testConfig(b, Config{Form: form, Rate: 200_000, Skew: 1.1, Sources: n,
					Flashes: []Flash{{Key: "item:hot", Rate: 5000, TopSource: "inst-0", TopShare: 0.7}}})
				g, err := newGenerator(c, time.Now().UnixMilli())
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var i int64
				for b.Loop() {
					g.step(i)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(g.ticks*2050), "ns/event")
			})
		}
	}
}
