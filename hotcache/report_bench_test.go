package hotcache

import (
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// zipfKeys returns n keys drawn from a Zipf(s) distribution over ranks
// 1..keys, named item:<rank>, the way the load generator draws them.
func zipfKeys(n int, keys uint64, s float64) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), s, 1, keys-1)
	names := make(map[uint64]string)
	out := make([]string, n)
	for i := range out {
		r := z.Uint64() + 1
		k, ok := names[r]
		if !ok {
			k = "item:" + strconv.FormatUint(r, 10)
			names[r] = k
		}
		out[i] = k
	}
	return out
}

// BenchmarkReportCold is the reporting a Get of a key that is not hot pays
// (what countCold does before the Get goes to Redis): Zipf 1.1 over 200k
// keys, the reporter flushing every 100 ms into a discarding sink. It must
// not allocate: a key already in the table is a hash, a lock and a map
// update, and a new key's map entry reuses the previous flush's map.
func BenchmarkReportCold(b *testing.B) {
	keys := zipfKeys(1<<20, 200_000, 1.1)
	c := benchClient(b, withSink(&discardSink{}))
	for _, k := range keys { // the maps reach their working size
		c.countCold(k, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.countCold(keys[i&(len(keys)-1)], 100)
		i++
	}
}

// cpuSeconds is this process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkReporterShare is the reporter's share of an app instance's CPU
// at 200k accesses/s (Zipf 1.1 over 200k keys, of which the ten hottest are
// promoted and counted in their L1 entries): accesses are counted at that
// pace for 1 s per iteration while the reporter sums, encodes and hands its
// batches on every 100 ms. The process's CPU time over wall time is
// reported as cpu-%-of-a-core: every access's count, the flushes, GC, and,
// in the kafka case, kafka-go's Writer (LZ4, the SDK's default) sending to
// the broker of HOTSPOT_KAFKA. The pacing loop's own cost is included, so it
// is an upper bound.
func BenchmarkReporterShare(b *testing.B) {
	keys := zipfKeys(200_000, 200_000, 1.1)
	b.Run("discard", func(b *testing.B) {
		reporterShare(b, keys, benchClient(b, withSink(&discardSink{})))
	})
	b.Run("kafka", func(b *testing.B) {
		addr := stacktest.Kafka(b)
		topic := stacktest.Name(b)
		if _, err := kafkaio.EnsureTopic(b.Context(), []string{addr}, topic, 8); err != nil {
			b.Fatal(err)
		}
		reporterShare(b, keys, benchClient(b, WithKafka([]string{addr}, topic)))
	})
}

func reporterShare(b *testing.B, keys []string, c *Client) {
	const rate = 200_000
	var hot []string
	for r := 1; r <= 10; r++ {
		hot = append(hot, "item:"+strconv.Itoa(r))
	}
	promote(b, c, hot...)
	var wall, cpu float64
	i := 0
	for b.Loop() {
		start, cpu0 := time.Now(), cpuSeconds()
		for n := 0; n < rate; n++ {
			k := keys[i%len(keys)]
			i++
			if e := c.hot.Load().m[k]; e != nil {
				c.countHot(e, 100)
			} else {
				c.countCold(k, 100)
			}
			if n%1000 == 999 {
				if ahead := time.Duration(float64(n+1)/rate*1e9) - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		wall += time.Since(start).Seconds()
		cpu += cpuSeconds() - cpu0
	}
	b.ReportMetric(100*cpu/wall, "cpu-%-of-a-core")
	b.ReportMetric(rate*float64(b.N)/wall, "accesses/s")
}
