package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

const watchHelp = `
Follows the hot set in ZooKeeper, as every app's hotcache does, and prints
each change with the time it arrived: + for a key that turned hot, - for one
that went cold. Runs until interrupted.`

func runWatch(ctx context.Context, args []string) error {
	return watch(ctx, args, os.Getenv, os.Stdout)
}

func watch(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := newFlags("watch", watchHelp)
	zkServers := fs.String("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated")
	root := fs.String("zk-root", hotset.DefaultRoot, "ZooKeeper root of Hotspot")
	app := fs.String("app", "", "only this app (default: every app)")
	asJSON := fs.Bool("json", false, "print one JSON object per change")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	servers := envflag.SplitList(*zkServers)
	if len(servers) == 0 {
		return usagef("--zk: at least one ZooKeeper server")
	}
	zkAuth, err := zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST")
	if err != nil {
		return usageError{err}
	}
	connectCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	sess, err := zkgroup.Connect(connectCtx, servers, zkgroup.Config{Auth: zkAuth})
	cancel()
	if err != nil {
		return fmt.Errorf("no ZooKeeper session with %v (%v): is ZooKeeper running? `make up` starts one", servers, err)
	}
	defer sess.Close()
	enc := json.NewEncoder(out)
	w, err := hotwatch.New(sess, hotwatch.Config{Root: *root, App: *app, OnChange: func(c hotwatch.Change) {
		at := c.At.Local().Format("15:04:05.000")
		if *asJSON {
			enc.Encode(map[string]any{"at": c.At.UTC().Format(time.RFC3339Nano), "app": c.App, "added": c.Added, "removed": c.Removed})
			return
		}
		for _, k := range c.Added {
			fmt.Fprintf(out, "%s  + %s %s  rate %.0f/s\n", at, c.App, k.Key, k.Rate)
		}
		for _, k := range c.Removed {
			fmt.Fprintf(out, "%s  - %s %s\n", at, c.App, k)
		}
	}})
	if err != nil {
		return err
	}
	what := *root
	if *app != "" {
		what += " app " + *app
	}
	fmt.Fprintf(os.Stderr, "watching %s in %v (Ctrl-C stops)\n", what, servers)
	return w.Run(ctx)
}
