package main

import (
	"context"

	"fmt"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"
)

const historyHelp = `
Prints the stored promotions and demotions of one app, newest first, from any
hotspotd (GET /v1/history; the history lives in Redis and survives restarts),
then a timeline: each key's hot spells, oldest first.

--since and --until take an RFC 3339 time (2026-11-30T15:04:05Z) or a
duration back from now (1h, 90m).`

func runHistory(ctx context.Context, args []string) error {
	return historyCmd(ctx, args, os.Getenv, os.Stdout, time.Now())
}

func historyCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer, now time.Time) error {
	fs := newFlags("history", historyHelp)
	addr := hotspotdFlag(fs, "host:port of any hotspotd")
	app := fs.String("app", "", "the app (required)")
	key := fs.String("key", "", "only this key")
	since := fs.String("since", "1h", "oldest event: RFC 3339 time or duration back from now; empty for no bound")
	until := fs.String("until", "", "newest event: RFC 3339 time or duration back from now (default: now)")
	limit := fs.Int("limit", 100, "most events to print (1 to 10000)")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of tables")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	if *app == "" {
		return usagef("--app is required")
	}
	if *limit < 1 || *limit > 10_000 {
		return usagef("--limit %d must be from 1 to 10000", *limit)
	}
	q := hotspotapi.HistoryQuery{App: *app, Key: *key, Limit: *limit}
	for _, b := range []struct {
		flag, v string
		t       *time.Time
	}{{"--since", *since, &q.Since}, {"--until", *until, &q.Until}} {
		if b.v == "" {
			continue
		}
		t, err := whenFlag(b.v, now)
		if err != nil {
			return usagef("%s: %v", b.flag, err)
		}
		*b.t = t
	}
	c, err := apiClient(*addr, "")
	if err != nil {
		return err
	}
	res, err := c.History(ctx, q)
	if err != nil {
		return apiError(err)
	}
	if *asJSON {
		return printJSON(out, res)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tKIND\tKEY\tRATE/S\tRULE")
	for _, e := range res.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\n", e.At.Local().Format("2006-01-02 15:04:05.000"), e.Kind, e.Key, e.Rate, e.Rule)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d events of app %s", len(res.Events), res.App)
	if len(res.Events) == *limit || res.Truncated {
		fmt.Fprint(out, " (there may be older ones: raise --limit or narrow --since/--until)")
	}
	fmt.Fprintln(out)

	spans := hotSpans(res.Events, now)
	if len(spans) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nTimeline (hot spells, oldest first):")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tFROM\tTO\tHOT FOR")
	for _, s := range spans {
		from, to := "(before)", "(still hot)"
		if !s.from.IsZero() {
			from = s.from.Local().Format("15:04:05.000")
		}
		if !s.to.IsZero() {
			to = s.to.Local().Format("15:04:05.000")
		}
		dur := ""
		if !s.from.IsZero() {
			dur = spanEnd(s, now).Sub(s.from).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.key, from, to, dur)
	}
	return tw.Flush()
}

// whenFlag reads an RFC 3339 time or a duration back from now.
func whenFlag(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %s must be >= 0", v)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", v)
	}
	return t, nil
}

// span is one hot spell of a key; a zero from began before the events
// listed, a zero to has not ended.
type span struct {
	key      string
	from, to time.Time
}

// spanEnd is when s ended, or now when it has not.
func spanEnd(s span, now time.Time) time.Time {
	if s.to.IsZero() {
		return now
	}
	return s.to
}

// hotSpans pairs promotions and demotions (events newest first) into
// spells, ordered by start.
func hotSpans(events []hotspotapi.HistoryEvent, now time.Time) []span {
	var spans []span
	open := map[string]int{} // key -> index in spans of its unended spell
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		j, ok := open[e.Key]
		switch {
		case e.Kind == "promoted" && !ok:
			open[e.Key] = len(spans)
			spans = append(spans, span{key: e.Key, from: e.At})
		case e.Kind == "demoted" && ok:
			spans[j].to = e.At
			delete(open, e.Key)
		case e.Kind == "demoted":
			spans = append(spans, span{key: e.Key, to: e.At}) // promoted before the first event listed
		}
		// A second promotion of a key already hot (another shard took it
		// over) continues its spell.
	}
	slices.SortStableFunc(spans, func(a, b span) int {
		af, bf := a.from, b.from
		if af.IsZero() {
			af = a.to
		}
		if bf.IsZero() {
			bf = b.to
		}
		return af.Compare(bf)
	})
	return spans
}
