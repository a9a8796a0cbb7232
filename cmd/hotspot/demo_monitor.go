package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

// sample is one second of the apps' and Redis's counters.
type sample struct {
	at                          time.Duration
	gets, l1Hits, source, redis float64 // per second
	hot                         []string
}

type monitor struct {
	apps []string
	rdb  *redis.Client
	out  io.Writer
}

type counters struct{ hits, misses, source, redis float64 }

func (m *monitor) read(ctx context.Context) counters {
	var c counters
	for _, a := range m.apps {
		if ms, err := metricsOf(ctx, a); err == nil {
			c.hits += ms["hotspot_hotcache_l1_hits_total"]
			c.misses += ms["hotspot_hotcache_l1_misses_total"]
			c.source += ms["itemapp_source_reads_total"]
		}
	}
	if info, err := m.rdb.Info(ctx, "stats").Result(); err == nil {
		c.redis = redisStat(info, "keyspace_hits") + redisStat(info, "keyspace_misses")
	}
	return c
}

func redisStat(info, name string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// loop prints one line a second until ctx ends and returns the samples.
func (m *monitor) loop(ctx context.Context, start time.Time, nEvents func() int, w *hotwatch.Watcher) []sample {
	fmt.Fprintln(m.out, tableHeader())
	prev := m.read(ctx)
	var out []sample
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tk.C:
		}
		cur := m.read(ctx)
		s := sample{at: time.Since(start).Round(time.Second),
			gets:   (cur.hits + cur.misses) - (prev.hits + prev.misses),
			l1Hits: cur.hits - prev.hits, source: cur.source - prev.source, redis: cur.redis - prev.redis}
		prev = cur
		for _, k := range w.Snapshot().App("shop") {
			s.hot = append(s.hot, fmt.Sprintf("%s (%.0f/s)", k.Key, k.Rate))
		}
		out = append(out, s)
		fmt.Fprintln(m.out, tableRow(s))
	}
}

// The live table has fixed column widths, so that every line keeps the
// header's columns whatever the numbers (a tabwriter flushed line by line
// sizes each line on its own). The numeric columns are right-aligned and
// wide enough for billions per second; the hot keys come last, unaligned.
const tableFormat = "%6s  %14s  %7s  %14s  %14s  %s"

func tableHeader() string {
	return fmt.Sprintf(tableFormat, "time", "app gets/s", "L1 hit", "Redis reads/s", "source reads/s", "hot keys")
}

func tableRow(s sample) string {
	return fmt.Sprintf(tableFormat, s.at, thousands(s.gets), fmt.Sprintf("%.1f%%", s.hitPercent()),
		thousands(s.redis), thousands(s.source), strings.Join(s.hot, " "))
}

// hitPercent is the share of gets served from L1, in percent (0 without gets).
func (s sample) hitPercent() float64 {
	if s.gets == 0 {
		return 0
	}
	return 100 * s.l1Hits / s.gets
}

// thousands formats v rounded to an integer, with commas between groups of
// three digits: 1234567.4 is "1,234,567".
func thousands(v float64) string {
	digits := strconv.FormatFloat(math.Abs(math.Round(v)), 'f', 0, 64)
	var b strings.Builder
	if v <= -0.5 {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
