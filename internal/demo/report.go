package demo

import (
	"fmt"
	"io"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// printDemoSummary prints the run's summary: the driver's counts, every
// hot-set change, the detection delay of each flash key, the share of the
// flash keys' reads the apps served from memory as the cluster reported it,
// and the apps' and Redis's load before the flash crowd and at the end.
func printDemoSummary(out io.Writer, start time.Time, flashes []loadgen.Flash, d *driver, events []hotwatch.Change, samples []sample) {
	fmt.Fprintf(out, "\n== demo summary ==\n")
	fmt.Fprintf(out, "reads sent through the apps: %d; refused by the apps' rate limits (503): %d; failed: %d; not sent (apps saturated): %d\n",
		d.sent.Load(), d.throttled.Load(), d.failed.Load(), d.dropped.Load())
	printHotSetChanges(out, start, events)
	printDetectionDelays(out, flashes, d, events)
	printFlashServed(out, flashes[0].Start, samples)
	printBeforeAfter(out, flashes[0].Start, samples)
}

func printHotSetChanges(out io.Writer, start time.Time, events []hotwatch.Change) {
	fmt.Fprintln(out, "hot-set changes seen in ZooKeeper:")
	for _, c := range events {
		for _, k := range c.Added {
			fmt.Fprintf(out, "  +%6.1fs  %s turned hot (%.0f/s)\n", c.At.Sub(start).Seconds(), k.Key, k.Rate)
		}
		for _, k := range c.Removed {
			fmt.Fprintf(out, "  +%6.1fs  %s went cold\n", c.At.Sub(start).Seconds(), k)
		}
	}
}

// printDetectionDelays prints, per flash key, the time from its reads
// crossing 1000/s to its first publication in ZooKeeper.
func printDetectionDelays(out io.Writer, flashes []loadgen.Flash, d *driver, events []hotwatch.Change) {
	fmt.Fprintln(out, "detection delay of the flash keys (their reads crossing 1000/s -> published in ZooKeeper):")
	for _, f := range flashes {
		crossed, ok := d.crossing(f.Key, 1000)
		if !ok {
			fmt.Fprintf(out, "  %-12s never reached 1000 reads/s (the run ended first?)\n", f.Key)
			continue
		}
		if at, ok := firstPublished(events, f.Key); ok {
			fmt.Fprintf(out, "  %-12s %v\n", f.Key, at.Sub(crossed).Round(time.Millisecond))
		} else {
			fmt.Fprintf(out, "  %-12s not published\n", f.Key)
		}
	}
}

// firstPublished is when key first turned hot in events.
func firstPublished(events []hotwatch.Change, key string) (time.Time, bool) {
	for _, c := range events {
		for _, k := range c.Added {
			if k.Key == key {
				return c.At, true
			}
		}
	}
	return time.Time{}, false
}

// printFlashServed prints how much of the flash keys' reads the apps served
// from L1, as hotspotd reported it (served_l1, from the apps' effect
// reports summed over the cluster) every second from flashAt on while a
// flash key was hot: the mean of those fractions, each weighted by the key's
// rate that second, so it is a share of the flash keys' reads. A hotspotd
// whose answer has no served_l1 gives "not reported".
func printFlashServed(out io.Writer, flashAt time.Duration, samples []sample) {
	var sum, weight float64
	n := 0
	for _, s := range samples {
		if s.at < flashAt {
			continue
		}
		for _, k := range s.flash {
			if k.reported && k.rate > 0 {
				sum += k.fraction * k.rate
				weight += k.rate
				n++
			}
		}
	}
	if weight == 0 {
		fmt.Fprintln(out, "flash keys: share of their reads served from app memory not reported (hotspotd gives no served_l1)")
		return
	}
	fmt.Fprintf(out, "flash keys: %.1f%% of their reads served from app memory (cluster-reported served_l1, mean over the flash weighted by rate, %d key-seconds)\n",
		100*sum/weight, n)
}

// printBeforeAfter compares the seconds just before the first flash key
// (at flashAt) with the last seconds of the run.
func printBeforeAfter(out io.Writer, flashAt time.Duration, samples []sample) {
	var before, after []sample
	for _, s := range samples {
		if s.at > flashAt-6*time.Second && s.at <= flashAt {
			before = append(before, s)
		}
	}
	if n := len(samples); n >= 5 {
		after = samples[n-5:]
	}
	b, a := averageSamples(before), averageSamples(after)
	fmt.Fprintf(out, "before the flash crowd: %6.0f gets/s, L1 hit %5.1f%%, %6.0f Redis reads/s, %5.0f source reads/s\n",
		b.gets, b.hitPercent(), b.redis, b.source)
	fmt.Fprintf(out, "last 5 s (promoted):    %6.0f gets/s, L1 hit %5.1f%%, %6.0f Redis reads/s, %5.0f source reads/s\n",
		a.gets, a.hitPercent(), a.redis, a.source)
}

// averageSamples is the mean of ss (zero for none).
func averageSamples(ss []sample) sample {
	var a sample
	for _, s := range ss {
		a.gets += s.gets
		a.l1Hits += s.l1Hits
		a.redis += s.redis
		a.source += s.source
	}
	if n := float64(len(ss)); n > 0 {
		a.gets, a.l1Hits, a.redis, a.source = a.gets/n, a.l1Hits/n, a.redis/n, a.source/n
	}
	return a
}
