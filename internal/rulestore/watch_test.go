package rulestore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/promtest"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

var def = rules.Default(100, time.Second, 5*time.Second, 0.8)

// change is one callback of the Watcher.
type change struct {
	app string
	set *rules.Set
	at  time.Time
}

// watch starts a Watcher on root and returns its changes.
func watch(t *testing.T, s *zkgroup.Session, root string, reg prometheus.Registerer) (*rulestore.Watcher, chan change) {
	t.Helper()
	ch := make(chan change, 100)
	w, err := rulestore.NewWatcher(s, rulestore.WatchConfig{Root: root, Default: def, Registerer: reg},
		func(app string, set *rules.Set) { ch <- change{app, set, time.Now()} })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the watcher was not ready")
	}
	return w, ch
}

// next waits for the next change; it fails the test after d.
func next(t *testing.T, ch chan change, d time.Duration) change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(d):
		t.Fatalf("no change of the rules within %v", d)
	}
	return change{}
}

// threshold is the threshold a Set gives key.
func threshold(s *rules.Set, key string) float64 { e := s.Match(key); return e.Threshold }

// TestWatcher: every write, a bad node and a deletion reach the callback
// within 1 s of the write; a bad node keeps the last good rules.
func TestWatcher(t *testing.T) {
	s := session(t, zkgroup.Config{})
	root := "/" + stacktest.Name(t)
	st := rulestore.New(s, root)
	ctx := t.Context()
	// An app that already has rules is reported by the first full read.
	if _, err := st.Put(ctx, list("old", 0, "a:")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, ch := watch(t, s, root, reg)
	if c := next(t, ch, time.Second); c.app != "old" || c.set.Len() != 1 {
		t.Fatalf("first read: %q with %d rules, want old with 1", c.app, c.set.Len())
	}

	const app = "shop/eu" // escaped into one node name
	put := func(l *rules.List) time.Time {
		t.Helper()
		if _, err := st.Put(ctx, l); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	steps := []struct {
		name  string
		write func() time.Time
		want  float64 // threshold of item:1 after the change
	}{
		{"create", func() time.Time { return put(list(app, 0, "item:")) }, 500},
		{"replace", func() time.Time {
			l := list(app, 1, "item:")
			l.Rules[0].Threshold = 700
			return put(l)
		}, 700},
		{"delete", func() time.Time {
			if err := st.Delete(ctx, app, 0); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}, def.Threshold},
		{"create again", func() time.Time { return put(list(app, 0, "item:")) }, 500},
	}
	for _, s := range steps {
		at := s.write()
		c := next(t, ch, 5*time.Second)
		if c.app != app {
			t.Fatalf("%s: change of %q, want %q", s.name, c.app, app)
		}
		if got := threshold(c.set, "item:1"); got != s.want {
			t.Errorf("%s: threshold of item:1 = %g, want %g", s.name, got, s.want)
		}
		if got := threshold(w.Set(app), "item:1"); got != s.want {
			t.Errorf("%s: Set(app) threshold of item:1 = %g, want %g", s.name, got, s.want)
		}
		if d := c.at.Sub(at); d > time.Second {
			t.Errorf("%s: applied %v after the write, want within 1s", s.name, d)
		}
	}

	// A node that fails to decode: logged, counted, the last good rules stay.
	raw := stacktest.ZKConn(t)
	for i, bad := range []string{`{"v":1,"app":"shop/eu","rules":[{"match":"prefix"}]}`, `not json`, `{"v":1,"app":"other","rules":[]}`} {
		if _, err := raw.Set(hotset.RulesPath(root, app), []byte(bad), -1); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for promtest.Counter(t, reg, "hotspot_rules_bad_nodes_total") != float64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("bad node %q not counted", bad)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := threshold(w.Set(app), "item:1"); got != 500 {
			t.Errorf("after bad node %q: threshold %g, want the last good 500", bad, got)
		}
	}
	select {
	case c := <-ch:
		t.Errorf("a bad node was reported: %q with %d rules", c.app, c.set.Len())
	default:
	}
	// Fixed again: reported.
	good, err := rules.EncodeNode(list(app, 0, "item:", "feed:"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Set(hotset.RulesPath(root, app), good, -1); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch, 5*time.Second); c.set.Len() != 2 {
		t.Errorf("fixed node: %d rules, want 2", c.set.Len())
	}
}

// TestWatcherAfterSessionExpiry: changes made while the watcher's session
// was expired are reported once it has a new session, and later changes
// still are (the watches were re-armed).
func TestWatcherAfterSessionExpiry(t *testing.T) {
	root := "/" + stacktest.Name(t)
	cut := &stacktest.Cutter{}
	ws := session(t, zkgroup.Config{SessionTimeout: time.Second, Dialer: cut.Dial})
	st := rulestore.New(session(t, zkgroup.Config{}), root)
	ctx := t.Context()
	if _, err := st.Put(ctx, list("a", 0, "x:")); err != nil {
		t.Fatal(err)
	}
	w, ch := watch(t, ws, root, nil)
	next(t, ch, 5*time.Second)

	// An ephemeral node of the watcher's session tells when it expired.
	raw := stacktest.ZKConn(t)
	jctx, stop := context.WithCancel(context.Background())
	var jwg sync.WaitGroup
	jwg.Go(func() { _ = ws.Join(jctx, root+"/probe", "w", nil) })
	t.Cleanup(func() { stop(); jwg.Wait() })
	probe := root + "/probe/w"
	var gone <-chan zk.Event
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, _, ch, err := raw.ExistsW(probe)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			gone = ch
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the probe node was not created")
		}
	}
	expired := ws.Expired()
	cut.Cut()
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the watcher's session did not expire")
	}
	// While it is gone: a changes, b appears.
	if _, err := st.Put(ctx, list("a", 1, "x:", "y:")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, list("b", 0, "z:")); err != nil {
		t.Fatal(err)
	}
	cut.Heal()
	select {
	case <-expired:
	case <-time.After(20 * time.Second):
		t.Fatal("Expired() did not fire")
	}
	got := map[string]int{}
	for len(got) < 2 {
		c := next(t, ch, 20*time.Second)
		got[c.app] = c.set.Len()
	}
	if got["a"] != 2 || got["b"] != 1 {
		t.Errorf("after expiry: rules per app %v, want a:2 b:1", got)
	}
	// The watches are armed again in the new session.
	at := time.Now()
	if err := st.Delete(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch, 5*time.Second); c.app != "b" || c.set.Len() != 0 {
		t.Errorf("delete after expiry: %q with %d rules, want b with 0", c.app, c.set.Len())
	} else if d := c.at.Sub(at); d > time.Second {
		t.Errorf("delete after expiry applied after %v, want within 1s", d)
	}
	if w.Set("b").Len() != 0 || w.Set("a").Len() != 2 {
		t.Errorf("Set: a %d rules, b %d; want 2 and 0", w.Set("a").Len(), w.Set("b").Len())
	}
}
