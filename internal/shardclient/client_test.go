package shardclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/shardclient"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/router"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// nopPublisher lets an aggregator serve HTTP without ZooKeeper; Run is not
// called in these tests.
type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, *hotset.Shard) error                { return nil }
func (nopPublisher) Remove(context.Context, string, string) error                { return nil }
func (nopPublisher) Load(context.Context, string) ([]*hotset.Shard, error)       { return nil, nil }
func (nopPublisher) Collect(context.Context, string, time.Duration) (int, error) { return 0, nil }
func (nopPublisher) Join(ctx context.Context, _ hotset.Member) error             { <-ctx.Done(); return nil }

type shard struct {
	id  string
	agg *aggregator.Aggregator
	srv *httptest.Server
}

func newShard(t *testing.T, id string) *shard {
	t.Helper()
	return newShardWith(t, id, func(h http.Handler) http.Handler { return h })
}

// newShardWith is newShard with the shard's handler wrapped.
func newShardWith(t *testing.T, id string, wrap func(http.Handler) http.Handler) *shard {
	t.Helper()
	a, err := aggregator.New(aggregator.Config{ID: id, Addr: "unused:1"}, nopPublisher{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wrap(a.Handler()))
	t.Cleanup(srv.Close)
	return &shard{id: id, agg: a, srv: srv}
}

// newSelfClient returns a Client whose own shard is self, handed its
// batches in-process, and the count of those batches.
func newSelfClient(t *testing.T, self *shard) (*shardclient.Client, *int) {
	t.Helper()
	calls := new(int)
	c, err := shardclient.New(shardclient.Config{Source: "d1", Timeout: 5 * time.Second, SelfID: self.id, Self: func(body []byte) error {
		*calls++
		return self.agg.TakePartials(body)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, calls
}

func (s *shard) member() []byte {
	return hotset.EncodeMember(hotset.Member{ID: s.id, Addr: strings.TrimPrefix(s.srv.URL, "http://")})
}

func newClient(t *testing.T) *shardclient.Client {
	t.Helper()
	c, err := shardclient.New(shardclient.Config{Source: "d1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func counts(n int) []shardapi.Count {
	cs := make([]shardapi.Count, n)
	for i := range cs {
		cs[i] = shardapi.Count{App: fmt.Sprint("app", i%3), Key: fmt.Sprint("item:", i), N: uint64(i + 1)}
	}
	return cs
}

// owners returns, for each count, the shard the ring over ids gives it.
func owners(t *testing.T, cs []shardapi.Count, ids ...string) []string {
	t.Helper()
	var nodes []router.Node
	for _, id := range ids {
		nodes = append(nodes, router.Node{ID: id})
	}
	r, err := router.New(nodes, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		n, _ := r.Lookup(c.App + "\x00" + c.Key)
		out[i] = n.ID
	}
	return out
}

func TestSendSplitsByRingAndReroutes(t *testing.T) {
	a1, a2 := newShard(t, "agg-1"), newShard(t, "agg-2")
	shards := map[string]*shard{"agg-1": a1, "agg-2": a2}
	c := newClient(t)
	cs := counts(300)

	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, cs); !errors.Is(err, shardclient.ErrNoMembers) {
		t.Fatalf("Send without members = %v, want ErrNoMembers", err)
	}

	c.SetMembers(map[string][]byte{"agg-1": a1.member(), "agg-2": a2.member()})
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, cs); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for i, owner := range owners(t, cs, "agg-1", "agg-2") {
		per[owner]++
		for id, s := range shards {
			st, ok := s.agg.Key(cs[i].App, cs[i].Key)
			if want := id == owner; ok != want || (ok && st.Rate != float64(cs[i].N)) {
				t.Fatalf("%s/%s at %s: tracked %v rate %v; want tracked %v (owner %s) rate %d",
					cs[i].App, cs[i].Key, id, ok, st.Rate, want, owner, cs[i].N)
			}
		}
	}
	if per["agg-1"] < 100 || per["agg-2"] < 100 {
		t.Errorf("keys per shard = %v, want a split near half", per)
	}

	// agg-1 leaves: every key goes to agg-2 from the next Send on.
	c.SetMembers(map[string][]byte{"agg-2": a2.member()})
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, cs); err != nil {
		t.Fatal(err)
	}
	for i, owner := range owners(t, cs, "agg-1", "agg-2") {
		// agg-1's keys were not at agg-2 before (checked above). Both Sends
		// fall in one window unless the machine stalls for a second.
		st, ok := a2.agg.Key(cs[i].App, cs[i].Key)
		if !ok || st.Rate < float64(cs[i].N) {
			t.Fatalf("%s/%s (owner was %s) at agg-2 after re-route: tracked %v rate %v, want >= %d",
				cs[i].App, cs[i].Key, owner, ok, st.Rate, cs[i].N)
		}
	}
}

// TestSendHandsOwnShardItsBatchInProcess: with Self, the batches for the
// process's own shard go to it without HTTP (its advertised address is
// unreachable here), the others' over HTTP, and each count is taken once.
func TestSendHandsOwnShardItsBatchInProcess(t *testing.T) {
	self, other := newShard(t, "self"), newShard(t, "other")
	c, calls := newSelfClient(t, self)
	c.SetMembers(map[string][]byte{
		"self":  hotset.EncodeMember(hotset.Member{ID: "self", Addr: "127.0.0.1:1"}), // nothing listens
		"other": other.member(),
	})
	cs := counts(100)
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now(), Seq: 7}, cs); err != nil {
		t.Fatal(err)
	}
	if *calls != 1 {
		t.Errorf("Self called %d times for one Send, want 1", *calls)
	}
	for i, owner := range owners(t, cs, "self", "other") {
		for id, s := range map[string]*shard{"self": self, "other": other} {
			st, ok := s.agg.Key(cs[i].App, cs[i].Key)
			if want := id == owner; ok != want || (ok && st.Rate != float64(cs[i].N)) {
				t.Fatalf("%s/%s at %s: tracked %v rate %v; want tracked %v (owner %s) rate %d",
					cs[i].App, cs[i].Key, id, ok, st.Rate, want, owner, cs[i].N)
			}
		}
	}
}

func TestSendRoutesAroundFailedOwner(t *testing.T) {
	good := newShard(t, "good")
	var hits atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"draining"}`)
	}))
	defer bad.Close()
	c := newClient(t)
	c.SetMembers(map[string][]byte{
		"good": good.member(),
		"bad":  hotset.EncodeMember(hotset.Member{ID: "bad", Addr: strings.TrimPrefix(bad.URL, "http://")}),
	})
	cs := counts(100)
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, cs); err != nil {
		t.Fatalf("Send with one live owner = %v, want nil (rerouted)", err)
	}
	if hits.Load() != 1 {
		t.Errorf("bad owner got %d requests, want 1", hits.Load())
	}
	for _, k := range cs {
		if st, ok := good.agg.Key(k.App, k.Key); !ok || st.Rate < float64(k.N) {
			t.Fatalf("%s/%s at the live owner: tracked %v rate %v, want >= %d", k.App, k.Key, ok, st.Rate, k.N)
		}
	}
	// Within SuspectFor the failed owner is not tried again.
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, counts(100)); err != nil || hits.Load() != 1 {
		t.Errorf("second Send = %v with %d requests to bad, want nil and still 1", err, hits.Load())
	}

	// With no live owner left the Send fails, naming the owner.
	c.SetMembers(map[string][]byte{"gone": hotset.EncodeMember(hotset.Member{ID: "gone", Addr: "127.0.0.1:1"})})
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, counts(3)); err == nil || !strings.Contains(err.Error(), "aggregator gone") {
		t.Errorf("Send to a closed port = %v, want an error naming gone", err)
	}
}

func TestSetMembersSkipsBadMembers(t *testing.T) {
	c := newClient(t)
	c.SetMembers(map[string][]byte{
		"ok":       hotset.EncodeMember(hotset.Member{ID: "ok", Addr: "10.0.0.1:80"}),
		"garbage":  []byte("{"),
		"noaddr":   hotset.EncodeMember(hotset.Member{ID: "noaddr"}),
		"mismatch": hotset.EncodeMember(hotset.Member{ID: "other", Addr: "10.0.0.2:80"}),
		"v2":       []byte(`{"v":2,"id":"v2","addr":"10.0.0.3:80"}`),
	})
	got := c.Members()
	if len(got) != 1 || got[0].ID != "ok" || got[0].Addr != "10.0.0.1:80" {
		t.Errorf("members = %+v, want only ok", got)
	}
}

func TestBodyIsOneBatchPerOwner(t *testing.T) {
	var got []wire.KeyCount
	var sources []string
	var headers []wire.PartialHeader
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h, err := wire.DecodePartials(b, func(app, key []byte, n, writes, bytes, writeBytes uint64) {
			got = append(got, wire.KeyCount{Key: string(app) + "/" + string(key), Count: n, Writes: writes, Bytes: bytes, WriteBytes: writeBytes})
		})
		if err != nil || r.URL.Path != shardapi.PartialsPath {
			w.WriteHeader(400)
			return
		}
		sources = append(sources, h.Source)
		headers = append(headers, h)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := newClient(t)
	c.SetMembers(map[string][]byte{"only": hotset.EncodeMember(hotset.Member{ID: "only", Addr: strings.TrimPrefix(srv.URL, "http://")})})
	in := []shardapi.Count{{App: "a", Key: "x", N: 2}, {App: "b", Key: "y", N: 3, Writes: 1, Bytes: 900, WriteBytes: 300},
		{App: "a", Key: "z", N: 4, Bytes: 4096}, {App: "a", Key: "zero", N: 0}}
	f := shardapi.Flush{At: time.UnixMilli(5000), Span: 300 * time.Millisecond, End: time.UnixMilli(4900), Seq: 42,
		Step: 100 * time.Millisecond, Weights: []uint64{3, 0, 0, 6}}
	for range 2 { // the second Send reuses the buffers
		got, sources, headers = nil, nil, nil
		if err := c.Send(t.Context(), f, in); err != nil {
			t.Fatal(err)
		}
		want := []wire.KeyCount{{Key: "a/x", Count: 2}, {Key: "a/z", Count: 4, Bytes: 4096}, {Key: "b/y", Count: 3, Writes: 1, Bytes: 900, WriteBytes: 300}}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(sources) != 1 || sources[0] != "d1" {
			t.Errorf("received %v from %v, want %v in one batch from d1", got, sources, want)
		}
		// Pass 0 of flush 42: sequence 42<<8.
		wantH := wire.PartialHeader{Source: "d1", At: 5000, Span: 300, End: 4900, Seq: 42 << 8, Step: 100, Weights: []uint64{3, 0, 0, 6}}
		if len(headers) != 1 || !reflect.DeepEqual(headers[0], wantH) {
			t.Errorf("headers %+v, want [%+v]", headers, wantH)
		}
	}
}

func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c, err := shardclient.New(shardclient.Config{Source: "d1"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetMembers(map[string][]byte{
		"a": hotset.EncodeMember(hotset.Member{ID: "a", Addr: addr}),
		"b": hotset.EncodeMember(hotset.Member{ID: "b", Addr: addr}),
	})
	cs := counts(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Send(context.Background(), shardapi.Flush{At: time.Now()}, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(1000, "counts/op")
}

// TestSendRoutesSourcesAndEffects: a key's sources and effect go to the
// shard that gets its counts, an instance's effect to one shard, also when
// they are rerouted around a failed owner, and a rerouted count keeps its
// writes and bytes.
func TestSendRoutesSourcesAndEffects(t *testing.T) {
	type seen struct {
		mu   sync.Mutex
		by   map[string][]string // key -> what this shard got of it
		down bool
	}
	servers := map[string]*seen{}
	members := map[string][]byte{}
	for _, id := range []string{"s1", "s2", "s3"} {
		s := &seen{by: map[string][]string{}, down: id == "s3"}
		servers[id] = s
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if s.down {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			_, err := wire.DecodePartialsWith(b, func(app, key []byte, n, writes, bytes, _ uint64) {
				s.by[string(key)] = append(s.by[string(key)], fmt.Sprintf("count %d %d %d", n, writes, bytes))
			}, wire.PartialExtras{
				Sources: func(_, key []byte, total uint64, top []wire.SourceCount, distinct []byte) {
					s.by[string(key)] = append(s.by[string(key)], fmt.Sprintf("sources %d %v %s", total, top, distinct))
				},
				Effect: func(_, key []byte, c wire.EffectCounts) {
					s.by[string(key)] = append(s.by[string(key)], fmt.Sprintf("effect %d", c.L1Hits))
				},
				Instance: func(app, src []byte, c wire.EffectCounts) {
					s.by[string(src)] = append(s.by[string(src)], fmt.Sprintf("instance %s %d", app, c.L1Hits))
				},
			})
			if err != nil {
				w.WriteHeader(400)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		members[id] = hotset.EncodeMember(hotset.Member{ID: id, Addr: strings.TrimPrefix(srv.URL, "http://")})
	}
	c := newClient(t)
	c.SetMembers(members)
	var in []shardapi.Count
	f := shardapi.Flush{At: time.Now()}
	for i := range 30 {
		k := "k" + strconv.Itoa(i)
		in = append(in, shardapi.Count{App: "a", Key: k, N: 10, Writes: 2, Bytes: 100})
		f.Sources = append(f.Sources, shardapi.KeySources{App: "a", Key: k, Total: 10, Top: []shardapi.SourceCount{{Src: "pod-1", N: 7}}, Distinct: []byte("hll")})
		f.Effects = append(f.Effects, shardapi.KeyEffect{App: "a", Key: k, Effect: shardapi.Effect{L1Hits: 5}})
		f.Instances = append(f.Instances, shardapi.InstanceEffect{App: "a", Instance: "pod-" + strconv.Itoa(i), Effect: shardapi.Effect{L1Hits: 5}})
	}
	if err := c.Send(t.Context(), f, in); err != nil {
		t.Fatal(err)
	}
	want := []string{"count 10 2 100", "sources 10 [{pod-1 7}] hll", "effect 5"}
	for _, k := range in {
		var got [][]string
		for _, s := range servers {
			if g := s.by[k.Key]; g != nil {
				got = append(got, g)
			}
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("%s: shards got %v, want one shard with %v", k.Key, got, want)
		}
	}
	for i := range 30 {
		pod := "pod-" + strconv.Itoa(i)
		var got [][]string
		for _, s := range servers {
			if g := s.by[pod]; g != nil {
				got = append(got, g)
			}
		}
		if want := []string{"instance a 5"}; len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("%s: shards got %v, want one shard with %v", pod, got, want)
		}
	}
}

// TestSendFollowsShardsThatLeftSelfOut: a process cut off from ZooKeeper
// still has its own shard in its ring after the others dropped it. Once
// most of their answers (MembersHeader, through Announce) leave it out, its
// detector routes that shard's keys as they do, to each key's owner in the
// ring without it; once most list it again, to it again. One shard with a
// stale view of its own does not decide.
func TestSendFollowsShardsThatLeftSelfOut(t *testing.T) {
	self := newShard(t, "self")
	ids := []string{"a", "b", "c"}
	views, peers := map[string]*shardclient.Client{}, map[string]*shard{}
	shards := map[string]*shard{"self": self}
	for _, id := range ids {
		views[id] = newClient(t) // the process of shard id's view of the members
		peers[id] = newShardWith(t, id, views[id].Announce)
		shards[id] = peers[id]
	}
	c, calls := newSelfClient(t, self)
	all := map[string][]byte{"self": self.member()}
	for _, id := range ids {
		all[id] = peers[id].member()
	}
	without := maps.Clone(all)
	delete(without, "self")
	c.SetMembers(all)
	// see sets what each peer's process routes to: with self or without.
	see := func(withSelf ...bool) {
		for i, id := range ids {
			m := without
			if withSelf[i] {
				m = all
			}
			views[id].SetMembers(m)
		}
	}
	// send sends 300 counts of keys named after round and checks that each
	// is at the owner the ring over ring gives it, and nowhere else, and
	// that Self was called wantCalls times in all.
	send := func(round, wantCalls int, ring ...string) {
		t.Helper()
		cs := counts(300)
		for i := range cs {
			cs[i].Key = fmt.Sprintf("r%d:%s", round, cs[i].Key)
		}
		if err := c.Send(t.Context(), shardapi.Flush{At: time.Now(), Seq: uint64(round)}, cs); err != nil {
			t.Fatal(err)
		}
		for i, owner := range owners(t, cs, ring...) {
			for id, s := range shards {
				_, ok := s.agg.Key(cs[i].App, cs[i].Key)
				if ok != (id == owner) {
					t.Fatalf("round %d: %s/%s at %s: %v; its owner over %v is %s", round, cs[i].App, cs[i].Key, id, ok, ring, owner)
				}
			}
		}
		if *calls != wantCalls {
			t.Fatalf("round %d: Self called %d times in all, want %d", round, *calls, wantCalls)
		}
	}
	see(false, false, true) // a and b have dropped self; c is cut off too, its view stale
	send(1, 1, "self", "a", "b", "c")
	// The answers left self out: from this Send on, its keys go where the
	// others send them, and it gets an empty batch, so that its keys'
	// windows empty rather than stall.
	send(2, 2, "a", "b", "c")
	send(3, 3, "a", "b", "c")
	see(true, false, true)    // back, and seen by a, not yet by b: most list it
	send(4, 4, "a", "b", "c") // the answers to this Send list it...
	send(5, 5, "self", "a", "b", "c")
	see(false, true, true) // one shard's view without it does not move it
	send(6, 6, "self", "a", "b", "c")
	send(7, 7, "self", "a", "b", "c")
}
