package pinstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/pinstore"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

func session(t *testing.T) *zkgroup.Session {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{stacktest.ZK(t)}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestPinsAndBlocksReachReaders: pins and blocks written through the Store
// change the hot set every reader sees: a pinned key is hot with source
// "pinned", a blocked key is never hot, pinned or not.
func TestPinsAndBlocksReachReaders(t *testing.T) {
	s := session(t)
	root := "/" + stacktest.Name(t)
	st := pinstore.New(s, root)
	ctx := t.Context()

	w, err := hotwatch.New(s, hotwatch.Config{Root: root, App: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(wctx) })
	defer wg.Wait()
	defer cancel()

	hotKeys := func() []string {
		var out []string
		for _, k := range w.Snapshot().App("shop") {
			out = append(out, k.Key+"/"+k.Source)
		}
		slices.Sort(out)
		return out
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(hotKeys(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("hot keys %v, want %v", hotKeys(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	for _, k := range []string{"item:1", "item:2", "item:1"} {
		if err := st.Add(ctx, pinstore.Pins, "shop", k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("item:1/pinned", "item:2/pinned")
	if got, _ := st.List(ctx, pinstore.Pins, "shop"); !slices.Equal(got, []string{"item:1", "item:2"}) {
		t.Errorf("pins = %v, want [item:1 item:2]", got)
	}

	if err := st.Add(ctx, pinstore.Blocks, "shop", "item:2"); err != nil {
		t.Fatal(err)
	}
	waitFor("item:1/pinned")

	if err := st.Remove(ctx, pinstore.Blocks, "shop", "item:2"); err != nil {
		t.Fatal(err)
	}
	waitFor("item:1/pinned", "item:2/pinned")

	for _, k := range []string{"item:1", "item:2", "never-pinned"} {
		if err := st.Remove(ctx, pinstore.Pins, "shop", k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor()
	if ok, _, _ := stacktest.ZKConn(t).Exists(root + "/hot/shop/%pins"); ok {
		t.Error("the emptied pins node was not deleted")
	}
}

// TestConcurrentAddsAreAllKept: writers racing on one app's list lose nothing.
func TestConcurrentAddsAreAllKept(t *testing.T) {
	s := session(t)
	st := pinstore.New(s, "/"+stacktest.Name(t))
	var wg sync.WaitGroup
	want := []string{}
	for i := range 8 {
		key := string(rune('a' + i))
		want = append(want, key)
		wg.Go(func() {
			if err := st.Add(t.Context(), pinstore.Blocks, "shop", key); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, err := st.List(t.Context(), pinstore.Blocks, "shop"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("blocks = %v, %v; want %v", got, err, want)
	}
}
