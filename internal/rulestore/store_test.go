package rulestore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

func session(t *testing.T, cfg zkgroup.Config) *zkgroup.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{stacktest.ZK(t)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func list(app string, version int64, patterns ...string) *rules.List {
	l := &rules.List{App: app, Version: version, Rules: []rules.Rule{}}
	for _, p := range patterns {
		l.Rules = append(l.Rules, rules.Rule{Match: rules.Prefix, Pattern: p, Threshold: 500, Window: 2 * time.Second})
	}
	return l
}

func patterns(l *rules.List) []string {
	var out []string
	for _, r := range l.Rules {
		out = append(out, r.Pattern)
	}
	return out
}

// TestCompareAndSet: each write names the version it replaces; a stale or
// made-up version is a conflict and changes nothing.
func TestCompareAndSet(t *testing.T) {
	st := rulestore.New(session(t, zkgroup.Config{}), "/"+stacktest.Name(t))
	ctx := t.Context()
	steps := []struct {
		name    string
		do      func() (*rules.List, error)
		want    error // nil, rulestore.ErrConflict or *rules.Error (any)
		version int64 // of the stored list after the step
		stored  []string
	}{
		{"get without a node", func() (*rules.List, error) { return st.Get(ctx, "shop") }, nil, 0, nil},
		{"create", func() (*rules.List, error) { return st.Put(ctx, list("shop", 0, "item:")) }, nil, 1, []string{"item:"}},
		{"create again", func() (*rules.List, error) { return st.Put(ctx, list("shop", 0, "x:")) }, rulestore.ErrConflict, 1, []string{"item:"}},
		{"replace v1", func() (*rules.List, error) { return st.Put(ctx, list("shop", 1, "item:", "feed:")) }, nil, 2, []string{"item:", "feed:"}},
		{"stale v1", func() (*rules.List, error) { return st.Put(ctx, list("shop", 1, "x:")) }, rulestore.ErrConflict, 2, []string{"item:", "feed:"}},
		{"future v7", func() (*rules.List, error) { return st.Put(ctx, list("shop", 7, "x:")) }, rulestore.ErrConflict, 2, []string{"item:", "feed:"}},
		{"negative", func() (*rules.List, error) { return st.Put(ctx, list("shop", -1, "x:")) }, rulestore.ErrConflict, 2, []string{"item:", "feed:"}},
		{"bad rule", func() (*rules.List, error) {
			l := list("shop", 2, "a:", "b:")
			l.Rules[1].Window = 150 * time.Millisecond
			return st.Put(ctx, l)
		}, &rules.Error{}, 2, []string{"item:", "feed:"}},
		{"delete stale", func() (*rules.List, error) { return nil, st.Delete(ctx, "shop", 1) }, rulestore.ErrConflict, 2, []string{"item:", "feed:"}},
		{"delete v2", func() (*rules.List, error) { return nil, st.Delete(ctx, "shop", 2) }, nil, 0, nil},
		{"delete missing unconditionally", func() (*rules.List, error) { return nil, st.Delete(ctx, "shop", 0) }, nil, 0, nil},
		{"delete missing v1", func() (*rules.List, error) { return nil, st.Delete(ctx, "shop", 1) }, rulestore.ErrConflict, 0, nil},
		{"create after delete", func() (*rules.List, error) { return st.Put(ctx, list("shop", 0)) }, nil, 1, nil},
		{"delete unconditionally", func() (*rules.List, error) { return nil, st.Delete(ctx, "shop", 0) }, nil, 0, nil},
		{"empty app", func() (*rules.List, error) { return st.Put(ctx, list("", 0)) }, rulestore.ErrNoApp, 0, nil},
	}
	for _, s := range steps {
		got, err := s.do()
		var re *rules.Error
		switch {
		case s.want == nil && err != nil:
			t.Fatalf("%s: %v, want no error", s.name, err)
		case s.want == nil:
		case errors.As(s.want, &re):
			if !errors.As(err, &re) {
				t.Fatalf("%s: err %v, want a *rules.Error", s.name, err)
			}
		case !errors.Is(err, s.want):
			t.Fatalf("%s: err %v, want %v", s.name, err, s.want)
		}
		if s.want == nil && got != nil && got.Version != s.version {
			t.Errorf("%s: returned version %d, want %d", s.name, got.Version, s.version)
		}
		stored, err := st.Get(ctx, "shop")
		if err != nil {
			t.Fatalf("%s: Get: %v", s.name, err)
		}
		if stored.Version != s.version || stored.App != "shop" || len(stored.Rules) != len(s.stored) {
			t.Fatalf("%s: stored %q v%d %v, want v%d %v", s.name, stored.App, stored.Version, patterns(stored), s.version, s.stored)
		}
		for i, p := range patterns(stored) {
			if p != s.stored[i] {
				t.Fatalf("%s: stored %v, want %v", s.name, patterns(stored), s.stored)
			}
		}
	}
}

// TestConcurrentWriters: writers racing with the same version: exactly one
// wins, the rest get ErrConflict, and the stored list is the winner's.
func TestConcurrentWriters(t *testing.T) {
	st := rulestore.New(session(t, zkgroup.Config{}), "/"+stacktest.Name(t))
	ctx := t.Context()
	if _, err := st.Put(ctx, list("shop", 0, "base:")); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wins, conflicts atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			l := list("shop", 1, string(rune('a'+i))+":")
			got, err := st.Put(ctx, l)
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(patterns(got)[0])
			case errors.Is(err, rulestore.ErrConflict):
				conflicts.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != writers-1 {
		t.Fatalf("wins %d, conflicts %d; want 1 and %d", wins.Load(), conflicts.Load(), writers-1)
	}
	got, err := st.Get(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || patterns(got)[0] != winner.Load() {
		t.Errorf("stored v%d %v, want v2 [%v]", got.Version, patterns(got), winner.Load())
	}
}

// TestACL: with digest auth, the rules node is written by hotspotd's
// identity alone and read by the apps', like every node hotspotd writes.
func TestACL(t *testing.T) {
	writer := zkgroup.Digest{User: "hotspotd", Password: "w-secret"}
	app := zkgroup.Digest{User: "app", Password: "a-secret"}
	root := "/" + stacktest.Name(t)
	w := session(t, zkgroup.Config{Auth: writer, ACL: zkgroup.ACL{Writer: writer, Readers: []zkgroup.Digest{app}}})
	st := rulestore.New(w, root)
	if _, err := st.Put(t.Context(), list("shop", 0, "item:")); err != nil {
		t.Fatal(err)
	}
	a := session(t, zkgroup.Config{Auth: app})
	if got, err := rulestore.New(a, root).Get(t.Context(), "shop"); err != nil || got.Version != 1 {
		t.Fatalf("app reads %+v, %v; want version 1", got, err)
	}
	if _, err := rulestore.New(a, root).Put(t.Context(), list("shop", 1, "x:")); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("app writes: %v, want %v", err, zk.ErrNoAuth)
	}
	anon := session(t, zkgroup.Config{})
	if _, err := rulestore.New(anon, root).Get(t.Context(), "shop"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous reads: %v, want %v", err, zk.ErrNoAuth)
	}
	raw := stacktest.ZKConn(t)
	if err := raw.AddAuth("digest", []byte(writer.User+":"+writer.Password)); err != nil {
		t.Fatal(err)
	}
	acl, _, err := raw.GetACL(hotset.RulesPath(root, "shop"))
	if err != nil {
		t.Fatal(err)
	}
	if len(acl) != 2 || acl[0].Perms != zk.PermAll || acl[1].Perms != zk.PermRead {
		t.Errorf("ACL %+v, want the writer with every permission and the app reading", acl)
	}
	t.Cleanup(func() {
		// Only the writer may delete what it created.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Delete(ctx, "shop", 0)
	})
}
