package hotcache

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

func TestLookupHot(t *testing.T) {
	src := newSource("a", "1")
	c := newClient(t, WithLoader(src))
	if _, st, err := c.LookupHot(context.Background(), "a"); st != NotHot || err != nil {
		t.Fatalf("cold key: state %v, err %v; want NotHot", st, err)
	}
	if n := src.loads.Load(); n != 0 {
		t.Fatalf("LookupHot of a cold key read the source %d times", n)
	}
	promote(t, c, "a", "gone")
	v, st, err := c.LookupHot(context.Background(), "a")
	if st != HotHit || err != nil || string(v) != "1" {
		t.Fatalf("hot key: %q, %v, %v; want 1, HotHit", v, st, err)
	}
	if _, st, _ := c.LookupHot(context.Background(), "gone"); st != HotNotFound {
		t.Fatalf("hot key not found: state %v, want HotNotFound", st)
	}
}

func TestReplyCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource("k", "v")
		c := newClient(t, WithLoader(src), WithHotReadLimit(2), WithL1(0, 10*time.Second))
		r := c.NewReplyCache(1 << 20)
		if _, _, st := r.Get("k", "hgetall"); st != NotHot {
			t.Fatalf("cold key: %v, want NotHot", st)
		}
		promote(t, c, "k") // takes one of the two tokens
		_, tk, st := r.Get("k", "hgetall")
		if st != HotMiss {
			t.Fatalf("first read: %v, want HotMiss", st)
		}
		r.Put(tk, []byte("*0\r\n"))
		got, _, st := r.Get("k", "hgetall")
		if st != HotHit || string(got) != "*0\r\n" {
			t.Fatalf("second read: %q, %v; want the stored reply, HotHit", got, st)
		}
		if _, _, st := r.Get("k", "other"); st != HotLimited {
			t.Fatalf("another variant with no token left: %v, want HotLimited", st)
		}
		// An invalidation drops every reply of the key.
		c.DropLocal("k")
		synctest.Wait()
		time.Sleep(time.Second) // tokens again
		_, tk, st = r.Get("k", "hgetall")
		if st != HotMiss {
			t.Fatalf("after DropLocal: %v, want HotMiss", st)
		}
		// A read that raced with an invalidation is not kept.
		c.DropLocal("k")
		r.Put(tk, []byte("*2\r\n$1\r\nf\r\n$1\r\nold\r\n"))
		if _, _, st := r.Get("k", "hgetall"); st == HotHit {
			t.Fatal("a reply read before an invalidation was kept")
		}
		// Past the TTL a reply is stale: served only when the bucket refuses.
		time.Sleep(time.Second)
		_, tk, _ = r.Get("k", "v2")
		r.Put(tk, []byte("+x\r\n"))
		time.Sleep(11 * time.Second)
		for range 3 { // the bucket holds 2
			r.Get("k", "drain")
		}
		if got, _, st := r.Get("k", "v2"); st != HotHit || string(got) != "+x\r\n" {
			t.Fatalf("stale reply with the bucket empty: %q, %v; want it served", got, st)
		}
		// Demotion drops the replies; Sweep frees them.
		c.onChange(hotwatch.Change{App: "shop", Removed: []string{"k"}, At: time.Now()})
		r.Sweep()
		if s := r.Stats(); s.Keys != 0 || s.Bytes != 0 {
			t.Fatalf("after demotion and Sweep: %+v, want empty", s)
		}
	})
}

// TestReplyCacheAfterMissedBroadcasts: once the invalidation subscription
// was lost (markAllStale), a reply read before is read again, and served
// only when the hot-read bucket refuses that read.
func TestReplyCacheAfterMissedBroadcasts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, WithLoader(newSource("k", "v")), WithHotReadLimit(2), WithL1(0, 10*time.Second))
		r := c.NewReplyCache(1 << 20)
		promote(t, c, "k")
		time.Sleep(time.Second) // tokens again
		_, tk, _ := r.Get("k", "hgetall")
		r.Put(tk, []byte("*0\r\n"))
		c.markAllStale()
		synctest.Wait()
		time.Sleep(time.Second)
		_, tk, st := r.Get("k", "hgetall")
		if st != HotMiss {
			t.Fatalf("a reply from before the subscription was lost: %v, want HotMiss (read again)", st)
		}
		// A read that started before the loss is not fresh either.
		c.markAllStale()
		synctest.Wait()
		r.Put(tk, []byte("*2\r\n$1\r\nf\r\n$3\r\nold\r\n"))
		time.Sleep(time.Second)
		if _, _, st := r.Get("k", "hgetall"); st != HotMiss {
			t.Fatalf("a reply read across the loss: %v, want HotMiss", st)
		}
		for range 3 { // the bucket holds 2
			r.Get("k", "drain")
		}
		if got, _, st := r.Get("k", "hgetall"); st != HotHit || string(got) != "*2\r\n$1\r\nf\r\n$3\r\nold\r\n" {
			t.Fatalf("with the bucket empty: %q, %v; want the stale reply served", got, st)
		}
	})
}

func TestReplyCacheBudget(t *testing.T) {
	c := newClient(t, WithLoader(newSource("k", "v")), WithHotReadLimit(NoLimit))
	promote(t, c, "k")
	r := c.NewReplyCache(1000)
	_, tk, _ := r.Get("k", "a")
	r.Put(tk, make([]byte, 2000))
	if _, _, st := r.Get("k", "a"); st == HotHit {
		t.Fatal("a reply over the budget was kept")
	}
	if s := r.Stats(); s.Refused == 0 || s.Bytes > 1000 {
		t.Fatalf("stats %+v: want a refusal and at most 1000 bytes", s)
	}
}

func TestReportAndBroadcast(t *testing.T) {
	sink := newMemSink()
	c := newClient(t, WithLoader(newSource("h", "v")), withSink(sink))
	promote(t, c, "h")
	c.ReportRead("cold", 10)
	c.ReportRead("h", 5)
	c.ReportWrite("w", 3)
	gen := c.hot.Load().m["h"].gen.Load()
	if err := c.Broadcast(context.Background(), "h"); err != nil { // no Redis: local only
		t.Fatal(err)
	}
	if c.hot.Load().m["h"].gen.Load() == gen {
		t.Fatal("Broadcast did not drop the key locally")
	}
	want := map[string]tally{"cold": {reads: 1, readBytes: 10}, "h": {reads: 1, readBytes: 5}, "w": {writes: 1, writeBytes: 3}}
	deadline := time.Now().Add(5 * time.Second)
	for k, w := range want {
		for sink.tally(k) != w {
			if time.Now().After(deadline) {
				t.Fatalf("%s reported as %+v, want %+v", k, sink.tally(k), w)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
