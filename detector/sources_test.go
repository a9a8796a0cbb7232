package detector

import (
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// TestSourcesAndEffects: a key at 3x the threshold, 70 % of its sourced
// accesses from one source and a tenth of its accesses without a source,
// reaches the Sink in a report once a second with its total (with
// the accesses without a source), its sources (busiest first, shares as
// sent) and a sketch that counts them; a cold key's sources are not
// tracked; the effect batches the apps wrote reach the Sink summed per
// key and per instance.
func TestSourcesAndEffects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0)
		_, stop := startFake(t, Config{}, src, sink)
		share := map[string]int{"pod-a": 105, "pod-b": 15, "pod-c": 15, "pod-d": 15} // per 50 ms: 3000/s
		// 3 s of rounds: at least three reports.
		for range 60 {
			for s, n := range share {
				topic.append(0, fmt.Appendf(nil, `{"app":"shop","key":"item:42","count":%d,"src":%q}`, n, s))
			}
			topic.append(0, []byte(`{"app":"shop","key":"item:42","count":17}`))
			topic.append(0, []byte(`{"app":"shop","key":"cold","src":"pod-x"}`))
			time.Sleep(50 * time.Millisecond)
		}
		eff := wire.EffectCounts{L1Hits: 500, L2Reads: 20, SourceLoads: 2, Limited: 5}
		topic.append(0, wire.AppendEffects(nil, "shop", "pod-a", 1, 5000, []wire.Effect{{Key: "item:42", EffectCounts: eff}}))
		topic.append(0, wire.AppendEffects(nil, "shop", "pod-b", 1, 5000, []wire.Effect{{Key: "item:42", EffectCounts: eff}}))
		topic.append(0, wire.AppendEffects(nil, "shop", "pod-a", 1, 5000, []wire.Effect{{Key: "cold", EffectCounts: eff}}))
		topic.append(0, []byte(`{"app":"shop","key":"item:42","count":150,"src":"pod-a"}`))
		time.Sleep(time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		bySrc := map[string]uint64{}
		var total, reported uint64 // the sources' counts, the reports' totals
		sk, _ := hyperloglog.NewSketch(sketchPrecision, true)
		var effects wire.EffectCounts
		instances := map[string]wire.EffectCounts{}
		sketches, reports, rounds := 0, 0, len(sink.flushes)
		sink.mu.Lock()
		for _, f := range sink.flushes {
			for _, s := range f.Sources {
				if s.App != "shop" || s.Key != "item:42" {
					t.Errorf("sources of %s/%s sent: only item:42 is near the threshold", s.App, s.Key)
					continue
				}
				reports++
				reported += s.Total
				for i, sc := range s.Top {
					if i > 0 && sc.N > s.Top[i-1].N {
						t.Errorf("sources not busiest first: %+v", s.Top)
					}
					bySrc[sc.Src] += sc.N
					total += sc.N
				}
				if len(s.Distinct) == 0 {
					t.Errorf("a report without its sketch: %+v", s)
					continue
				}
				sketches++
				var o hyperloglog.Sketch
				if err := o.UnmarshalBinary(s.Distinct); err != nil {
					t.Fatalf("sketch: %v", err)
				}
				sk.Merge(&o)
			}
			for _, in := range f.Instances {
				if in.App != "shop" {
					t.Errorf("effect of instance %s/%s", in.App, in.Instance)
				}
				c := instances[in.Instance]
				c.L1Hits += in.L1Hits
				c.L2Reads += in.L2Reads
				c.SourceLoads += in.SourceLoads
				c.Limited += in.Limited
				instances[in.Instance] = c
			}
			for _, e := range f.Effects {
				if e.App != "shop" || e.Key != "item:42" && e.Key != "cold" {
					t.Errorf("effect of %s/%s", e.App, e.Key)
				}
				if e.Key == "cold" {
					continue
				}
				effects.L1Hits += e.L1Hits
				effects.L2Reads += e.L2Reads
				effects.SourceLoads += e.SourceLoads
				effects.Limited += e.Limited
			}
		}
		sink.mu.Unlock()
		if total == 0 {
			t.Fatal("no sources sent")
		}
		if a := float64(bySrc["pod-a"]) / float64(total); a < 0.68 || a > 0.72 {
			t.Errorf("pod-a sent %.3f of the tracked accesses with a source, want 0.70 (%v)", a, bySrc)
		}
		// 105 of every 167 accesses: 0.629.
		if a := float64(bySrc["pod-a"]) / float64(reported); a < 0.61 || a > 0.65 {
			t.Errorf("pod-a sent %.3f of the tracked accesses (%d of %d reported), want 0.63", a, bySrc["pod-a"], reported)
		}
		if sketches < 3 || reports > rounds/10+3 {
			t.Errorf("%d reports (%d sketches) in %d rounds, want one a second, the first and the last", reports, sketches, rounds)
		}
		if n := sk.Estimate(); n != 4 {
			t.Errorf("distinct sources %d, want 4", n)
		}
		if want := (wire.EffectCounts{L1Hits: 1000, L2Reads: 40, SourceLoads: 4, Limited: 10}); effects != want {
			t.Errorf("effects %+v, want %+v", effects, want)
		}
		twice := wire.EffectCounts{L1Hits: 1000, L2Reads: 40, SourceLoads: 4, Limited: 10}
		if want := map[string]wire.EffectCounts{"pod-a": twice, "pod-b": eff}; !reflect.DeepEqual(instances, want) {
			t.Errorf("instances %+v, want %+v", instances, want)
		}
	})
}
