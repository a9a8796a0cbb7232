package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/promtext"
)

// sample is one second of the apps' and Redis's counters.
type sample struct {
	at                          time.Duration
	gets, l1Hits, source, redis float64 // per second
	hot                         []string
	flash                       []servedL1 // the flash keys hotspotd lists as hot with their served_l1
}

// servedL1 is what hotspotd's /v1/hotkeys says of one hot key: its rate and
// the fraction of its reads that the apps of the whole cluster answered from
// L1, as their effect reports add up (absent from a hotspotd that predates
// them: reported false).
type servedL1 struct {
	key      string
	rate     float64
	fraction float64
	reported bool
}

type monitor struct {
	apps      []string
	rdb       *redis.Client
	out       io.Writer
	hotspotd  *hotspotapi.Client // a hotspotd, for served_l1; nil: none
	app       string             // the demo's app
	flashKeys []string           // keys of the flash crowd
}

type counters struct{ hits, misses, source, redis float64 }

func (m *monitor) read(ctx context.Context) counters {
	var c counters
	for _, a := range m.apps {
		if ms, err := metricsOf(ctx, a); err == nil { // an itemapp's
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
		s.flash = m.flashServed(ctx)
		for _, k := range w.Snapshot().App("shop") {
			s.hot = append(s.hot, fmt.Sprintf("%s (%.0f/s)", k.Key, k.Rate))
		}
		out = append(out, s)
		fmt.Fprintln(m.out, tableRow(s))
	}
}

// flashServed asks hotspotd which flash keys are hot now, with their
// served_l1; nil when it does not answer within half a second.
func (m *monitor) flashServed(ctx context.Context) []servedL1 {
	if m.hotspotd == nil || len(m.flashKeys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	hot, err := m.hotspotd.HotKeys(ctx, m.app)
	if err != nil {
		return nil
	}
	all := servedOf(hot)
	return slices.DeleteFunc(all, func(s servedL1) bool { return !slices.Contains(m.flashKeys, s.key) })
}

// servedOf is the hot keys of an app with their rate and served_l1
// (reported false where the answer has none).
func servedOf(a hotspotapi.AppHotKeys) []servedL1 {
	out := make([]servedL1, 0, len(a.HotKeys))
	for _, k := range a.HotKeys {
		s := servedL1{key: k.Key, rate: k.Rate}
		if k.ServedL1 != nil {
			s.fraction, s.reported = *k.ServedL1, true
		}
		out = append(out, s)
	}
	return out
}

// metricsOf scrapes the /metrics of the app at addr, each metric summed
// over its label sets.
func metricsOf(ctx context.Context, addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", addr, resp.Status)
	}
	return promtext.Sum(page)
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
