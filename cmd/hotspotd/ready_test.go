package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

// TestNotReadyBeforeTheRules: /readyz stays 503 until the rules were read,
// even with the hot set read.
func TestNotReadyBeforeTheRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sess, err := zkgroup.Connect(ctx, []string{stacktest.ZK(t)}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	root := "/" + stacktest.Name(t)
	hot, err := hotwatch.New(sess, hotwatch.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := rulestore.NewWatcher(sess, rulestore.WatchConfig{Root: root, Default: rules.Default(1000, time.Second, 2*time.Second, 0.8)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &parts{watcher: hot, rules: rw}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { hot.Run(ctx) })
	select {
	case <-hot.Ready():
	case <-ctx.Done():
		t.Fatal("the hot set was not read")
	}
	if err := ready(p); err == nil || !strings.Contains(err.Error(), "rules not read") {
		t.Fatalf("ready() before the rules were read = %v, want the rules named", err)
	}
	wg.Go(func() { rw.Run(ctx) })
	select {
	case <-rw.Ready():
	case <-ctx.Done():
		t.Fatal("the rules were not read")
	}
	if err := ready(p); err != nil {
		t.Fatalf("ready() after both were read = %v", err)
	}
}
