package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotspotapi"
)

const hotkeysHelp = `
Prints the current hot keys from any hotspotd (each one answers for the
whole cluster), as a table or as the API's JSON. RULE is the index of the
app's rule that made a key hot ("default": the default rule, "-": pinned);
KIND is count, bytes (RATE/S is then bytes per second) or write (apps do
not cache it). It warns (on stderr) when
that hotspotd consumes another access topic than --topic.`

func runHotkeys(ctx context.Context, args []string) error {
	return hotkeys(ctx, args, os.Getenv, os.Stdout, os.Stderr)
}

// hotkeys prints the table (or JSON) to out and warnings to errOut.
func hotkeys(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := newFlags("hotkeys", hotkeysHelp)
	addr := hotspotdFlag(fs, "host:port of any hotspotd")
	app := fs.String("app", "", "only this app (default: every app)")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of a table")
	topic := fs.String("topic", hotset.DefaultTopic, "access topic the keys are expected from (a warning when hotspotd consumes another)")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	if m := topicMismatch(ctx, []string{*addr}, *topic); m != "" {
		fmt.Fprintf(errOut, "warning: these hot keys are not those of your topic: %s\n", m)
	}
	c, err := apiClient(*addr, "")
	if err != nil {
		return err
	}
	var apps []hotspotapi.AppHotKeys
	var answer any
	if *app != "" {
		one, err := c.HotKeys(ctx, *app)
		if err != nil {
			return apiError(err)
		}
		apps, answer = []hotspotapi.AppHotKeys{one}, one
	} else {
		all, err := c.AllHotKeys(ctx)
		if err != nil {
			return apiError(err)
		}
		apps, answer = all.Apps, all
	}
	if *asJSON {
		return printJSON(out, answer)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tKEY\tRATE/S\tSINCE\tSOURCE\tRULE\tKIND")
	n := 0
	for _, a := range apps {
		for _, k := range a.HotKeys {
			since := k.Since
			if t, err := time.Parse(time.RFC3339Nano, k.Since); err == nil {
				since = t.Local().Format("15:04:05.000")
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\n", a.App, k.Key, k.Rate, since, k.Source, ruleName(k.Rule), cmp.Or(k.Kind, "count"))
			n++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d hot keys\n", n)
	return nil
}

// ruleName shows a hot key's rule: its index in the app's list, "default"
// for the default rule, "-" for none (a pinned key, or a hotspotd that
// predates rules).
func ruleName(rule *int) string {
	switch {
	case rule == nil:
		return "-"
	case *rule < 0:
		return "default"
	}
	return strconv.Itoa(*rule)
}
