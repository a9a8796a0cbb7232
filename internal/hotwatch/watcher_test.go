package hotwatch

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
)

// fakeZK is an in-memory stand-in for zkgroup.Session.Watch: it calls fn with a
// directory's full contents at first and after every change.
type fakeZK struct {
	mu   sync.Mutex
	dirs map[string]map[string][]byte
	subs map[string][]chan struct{}
}

func newFakeZK() *fakeZK {
	return &fakeZK{dirs: map[string]map[string][]byte{}, subs: map[string][]chan struct{}{}}
}

func (f *fakeZK) watch(ctx context.Context, dir string, read func(string) bool, fn func(map[string][]byte)) error {
	for {
		f.mu.Lock()
		nodes := maps.Clone(f.dirs[dir])
		if nodes == nil {
			nodes = map[string][]byte{}
		}
		for name := range nodes {
			if read != nil && !read(name) {
				nodes[name] = nil
			}
		}
		ch := make(chan struct{})
		f.subs[dir] = append(f.subs[dir], ch)
		f.mu.Unlock()
		fn(nodes)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// set writes (data != nil) or deletes a node and fires the watches of its directory.
func (f *fakeZK) set(dir, name string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[dir] == nil {
		f.dirs[dir] = map[string][]byte{}
	}
	if data == nil {
		delete(f.dirs[dir], name)
	} else {
		f.dirs[dir][name] = data
	}
	for _, ch := range f.subs[dir] {
		close(ch)
	}
	f.subs[dir] = nil
}

const root = "/hs"

// putShard writes app's shard node with keys, Updated = now and the given TTL,
// and registers the app under <root>/hot.
func putShard(t *testing.T, f *fakeZK, app, shard string, updated time.Time, ttl time.Duration, keys ...hotset.Key) {
	t.Helper()
	b, err := hotset.Encode(&hotset.Shard{App: app, Shard: shard, Updated: updated.UnixMilli(), TTL: ttl.Milliseconds(), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	f.set(hotset.HotDir(root), hotset.Escape(app), []byte{})
	f.set(hotset.AppDir(root, app), hotset.Escape(shard), b)
}

type recorder struct {
	mu      sync.Mutex
	changes []Change
}

func (r *recorder) on(c Change) { r.mu.Lock(); r.changes = append(r.changes, c); r.mu.Unlock() }
func (r *recorder) all() []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

func start(t *testing.T, f *fakeZK, app string) (*Watcher, *recorder) {
	t.Helper()
	rec := &recorder{}
	w := newWatcher(f.watch, Config{Root: root, App: app, OnChange: rec.on})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return w, rec
}

func keysOf(s *Snapshot, app string) []string {
	var out []string
	for _, k := range s.App(app) {
		out = append(out, k.Key)
	}
	slices.Sort(out)
	return out
}

func TestMergeOverShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, _ := start(t, f, "shop")
		now := time.Now()
		putShard(t, f, "shop", "agg-1", now, 10*time.Second,
			hotset.Key{Key: "a", Rate: 100, Since: 50}, hotset.Key{Key: "b", Rate: 5, Since: 7})
		putShard(t, f, "shop", "agg-2", now, 10*time.Second,
			hotset.Key{Key: "a", Rate: 300, Since: 60}, hotset.Key{Key: "b", Rate: 1, Since: 3, Source: "pinned"})
		synctest.Wait()
		s := w.Snapshot()
		tests := []struct {
			key  string
			want hotset.Key
		}{
			{"a", hotset.Key{Key: "a", Rate: 300, Since: 50}},
			{"b", hotset.Key{Key: "b", Rate: 5, Since: 3, Source: "pinned"}},
		}
		for _, tt := range tests {
			if got, ok := s.Key("shop", tt.key); !ok || got != tt.want {
				t.Errorf("Key(%q) = %+v, %v; want %+v, true", tt.key, got, ok, tt.want)
			}
		}
		if got := s.App("shop"); len(got) != 2 || got[0].Key != "a" {
			t.Errorf("App = %+v, want a then b (by rate)", got)
		}
	})
}

func TestTTLFromLocalReceiveTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, rec := start(t, f, "shop")
		// The writer's clock is an hour behind ours: Updated is "old" but the
		// node was seen changing now, so it counts for a full TTL from now.
		t0 := time.Now()
		putShard(t, f, "shop", "agg-1", t0.Add(-time.Hour), 10*time.Second, hotset.Key{Key: "k", Rate: 1})
		synctest.Wait()
		// First read of a node already past its TTL by Updated: ignored...
		if got := keysOf(w.Snapshot(), "shop"); len(got) != 0 {
			t.Fatalf("stale node on first read: hot keys %v, want none", got)
		}
		// ...until it changes: from then on, TTL runs from the local receive time.
		putShard(t, f, "shop", "agg-1", t0.Add(-time.Hour+time.Millisecond), 10*time.Second, hotset.Key{Key: "k", Rate: 2})
		synctest.Wait()
		if got := keysOf(w.Snapshot(), "shop"); !slices.Equal(got, []string{"k"}) {
			t.Fatalf("after a change: hot keys %v, want [k]", got)
		}
		time.Sleep(8 * time.Second)
		putShard(t, f, "shop", "agg-1", t0.Add(-time.Hour+2*time.Millisecond), 10*time.Second, hotset.Key{Key: "k", Rate: 3})
		time.Sleep(9 * time.Second) // 17 s after the first change, 9 s after the renewal
		synctest.Wait()
		if got := keysOf(w.Snapshot(), "shop"); !slices.Equal(got, []string{"k"}) {
			t.Fatalf("9s after a renewal with TTL 10s: hot keys %v, want [k]", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := keysOf(w.Snapshot(), "shop"); len(got) != 0 {
			t.Fatalf("TTL after the last renewal: hot keys %v, want none", got)
		}
		ch := rec.all()
		if len(ch) != 2 {
			t.Fatalf("changes = %+v, want 2 (added, expired)", ch)
		}
		want := t0.Add(8*time.Second + 10*time.Second) // the renewal at 8 s plus the TTL
		if !slices.Equal(ch[1].Removed, []string{"k"}) || !ch[1].At.Equal(want) {
			t.Errorf("expiry change = %+v, want Removed [k] at %v", ch[1], want)
		}
	})
}

func TestRenewalWithSameBytesDoesNotExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, _ := start(t, f, "shop")
		now := time.Now()
		putShard(t, f, "shop", "s", now, 5*time.Second, hotset.Key{Key: "k"})
		time.Sleep(3 * time.Second)
		putShard(t, f, "shop", "s", now, 5*time.Second, hotset.Key{Key: "k"}) // same bytes: not a renewal
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := keysOf(w.Snapshot(), "shop"); len(got) != 0 {
			t.Errorf("identical rewrite extended the TTL: hot keys %v, want none", got)
		}
	})
}

func TestChangesAndEventTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, rec := start(t, f, "shop")
		synctest.Wait()
		select {
		case <-w.Ready():
		default:
			t.Fatal("Ready not closed after the first read of an empty app")
		}
		time.Sleep(time.Second)
		at := time.Now()
		putShard(t, f, "shop", "s", at, time.Minute, hotset.Key{Key: "a"}, hotset.Key{Key: "b"})
		synctest.Wait()
		putShard(t, f, "shop", "s", at.Add(time.Millisecond), time.Minute, hotset.Key{Key: "b", Rate: 9}, hotset.Key{Key: "c"})
		synctest.Wait()
		putShard(t, f, "shop", "s", at.Add(2*time.Millisecond), time.Minute, hotset.Key{Key: "b", Rate: 10}, hotset.Key{Key: "c"}) // rate only
		synctest.Wait()
		f.set(hotset.AppDir(root, "shop"), "s", nil)
		synctest.Wait()
		type step struct{ added, removed []string }
		var got []step
		for _, c := range rec.all() {
			var s step
			for _, k := range c.Added {
				s.added = append(s.added, k.Key)
			}
			s.removed = c.Removed
			slices.Sort(s.added)
			slices.Sort(s.removed)
			got = append(got, s)
			if !c.At.Equal(at) || c.App != "shop" {
				t.Errorf("change %+v: At %v App %q, want %v shop", c, c.At, c.App, at)
			}
		}
		want := []step{{added: []string{"a", "b"}}, {added: []string{"c"}, removed: []string{"a"}}, {removed: []string{"b", "c"}}}
		if len(got) != len(want) {
			t.Fatalf("changes = %+v, want %+v", got, want)
		}
		for i := range want {
			if !slices.Equal(got[i].added, want[i].added) || !slices.Equal(got[i].removed, want[i].removed) {
				t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}

func TestAllApps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		now := time.Now()
		putShard(t, f, "a/b", "s", now, time.Minute, hotset.Key{Key: "x"})
		w, rec := start(t, f, "")
		synctest.Wait()
		putShard(t, f, "web", "s", now, time.Minute, hotset.Key{Key: "y"})
		f.set(hotset.AppDir(root, "bad"), "s", []byte("not json"))
		f.set(hotset.HotDir(root), "bad", []byte{})
		synctest.Wait()
		<-w.Ready()
		s := w.Snapshot()
		if got, want := s.Apps(), []string{"a/b", "web"}; !slices.Equal(got, want) {
			t.Fatalf("Apps = %v, want %v", got, want)
		}
		f.set(hotset.HotDir(root), hotset.Escape("a/b"), nil)
		synctest.Wait()
		if got, want := w.Snapshot().Apps(), []string{"web"}; !slices.Equal(got, want) {
			t.Fatalf("after removing app a/b: Apps = %v, want %v", got, want)
		}
		last := rec.all()[len(rec.all())-1]
		if last.App != "a/b" || !slices.Equal(last.Removed, []string{"x"}) {
			t.Errorf("last change = %+v, want a/b removed [x]", last)
		}
		if s.Len("a/b") != 1 {
			t.Errorf("old snapshot changed: Len(a/b) = %d, want 1", s.Len("a/b"))
		}
	})
}

func TestRunFailsWhenWatchFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatcher(func(ctx context.Context, dir string, read func(string) bool, fn func(map[string][]byte)) error {
			return context.DeadlineExceeded // any error other than the caller's cancel
		}, Config{App: "shop"})
		if err := w.Run(t.Context()); err == nil {
			t.Fatal("Run = nil, want the watch's error")
		}
	})
}
