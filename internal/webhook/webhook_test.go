package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/webhook"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// setup connects to the real ZooKeeper and returns a root of the test's own,
// deleted at cleanup.
func setup(t *testing.T) (*zkgroup.Session, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{stacktest.ZK(t)}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	root := "/" + stacktest.Name(t)
	t.Cleanup(func() {
		if err := deleteAll(s, root); err != nil {
			t.Logf("cleanup of %s: %v", root, err)
		}
		s.Close()
	})
	return s, root
}

func deleteAll(s *zkgroup.Session, p string) error {
	ctx := context.Background()
	kids, err := s.Children(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteAll(s, p+"/"+k); err != nil {
			return err
		}
	}
	if err := s.Delete(ctx, p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

func TestStore(t *testing.T) {
	s, root := setup(t)
	st := webhook.NewStore(s, root)
	ctx := t.Context()
	put := func(app string, sub webhook.Subscription) error { return st.Put(ctx, app, sub) }
	errTests := []struct {
		name string
		sub  webhook.Subscription
		want error
	}{
		{"no name", webhook.Subscription{URL: "http://x/"}, webhook.ErrInvalid},
		{"bad name", webhook.Subscription{Name: "a/b", URL: "http://x/"}, webhook.ErrInvalid},
		{"no url", webhook.Subscription{Name: "a"}, webhook.ErrInvalid},
		{"relative url", webhook.Subscription{Name: "a", URL: "/hook"}, webhook.ErrInvalid},
		{"other scheme", webhook.Subscription{Name: "a", URL: "ftp://x/"}, webhook.ErrInvalid},
		{"long secret", webhook.Subscription{Name: "a", URL: "http://x/", Secret: strings.Repeat("s", 257)}, webhook.ErrInvalid},
	}
	for _, tt := range errTests {
		if err := put("shop", tt.sub); !errors.Is(err, tt.want) {
			t.Errorf("%s: Put = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, sub := range []webhook.Subscription{
		{Name: "ops", URL: "https://ops.example/hook", Secret: "s1"},
		{Name: "audit", URL: "http://audit.example/in"},
		{Name: "ops", URL: "https://ops.example/v2", Secret: "s2"}, // replaces
	} {
		if err := put("shop", sub); err != nil {
			t.Fatalf("Put %+v: %v", sub, err)
		}
	}
	got, err := st.List(ctx, "shop")
	want := []webhook.Subscription{{Name: "audit", URL: "http://audit.example/in"}, {Name: "ops", URL: "https://ops.example/v2", Secret: "s2"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("List = %+v, %v; want %+v", got, err, want)
	}
	// The node: documented path, versioned encoding.
	data, _, err := s.Get(ctx, root+"/webhooks/shop")
	if err != nil || !strings.HasPrefix(string(data), `{"v":1,"app":"shop","hooks":[`) {
		t.Errorf("node = %s, %v; want the version 1 encoding", data, err)
	}
	if _, _, err := webhook.Decode([]byte(`{"v":2,"app":"shop","hooks":[]}`)); err == nil {
		t.Error("Decode accepted an unknown version")
	}
	for _, name := range []string{"ops", "audit", "ops"} {
		if err := st.Delete(ctx, "shop", name); err != nil {
			t.Fatalf("Delete %s: %v", name, err)
		}
	}
	if _, _, err := s.Get(ctx, root+"/webhooks/shop"); !errors.Is(err, zk.ErrNoNode) {
		t.Error("an emptied app's node was kept")
	}
	for i := range webhook.MaxPerApp {
		if err := put("big", webhook.Subscription{Name: "h" + string(rune('a'+i/26)) + string(rune('a'+i%26)), URL: "http://x/"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("big", webhook.Subscription{Name: "one-more", URL: "http://x/"}); !errors.Is(err, webhook.ErrTooMany) {
		t.Errorf("Put past MaxPerApp = %v, want ErrTooMany", err)
	}
}

// receiver is an httptest server that keeps what it gets; fail decides the
// status of each request (nil: 200).
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	fail func(n int) int // status for the n-th request (1-based); 0 means 200
	ch   chan received
}

type received struct {
	at       time.Time
	ev       webhook.Event
	body     []byte
	sig      string
	delivery string
	kind     string
}

func newReceiver(t *testing.T, fail func(int) int) *receiver {
	r := &receiver{fail: fail, ch: make(chan received, 1000)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		rc := received{at: time.Now(), body: body, sig: req.Header.Get(webhook.SignatureHeader),
			delivery: req.Header.Get(webhook.DeliveryHeader), kind: req.Header.Get(webhook.EventHeader)}
		json.Unmarshal(body, &rc.ev)
		r.mu.Lock()
		r.got = append(r.got, rc)
		n := len(r.got)
		r.mu.Unlock()
		if r.fail != nil {
			if code := r.fail(n); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		r.ch <- rc
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *receiver) next(t *testing.T, within time.Duration) received {
	t.Helper()
	select {
	case rc := <-r.ch:
		return rc
	case <-time.After(within):
		t.Fatalf("no delivery within %v", within)
		return received{}
	}
}

// runDispatcher runs a Dispatcher until the test ends.
func runDispatcher(t *testing.T, s *zkgroup.Session, cfg webhook.Config) (*webhook.Dispatcher, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	d, err := webhook.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return d, reg
}

func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newDecision(app, key, kind string) decision.Decision {
	return decision.Decision{App: app, Key: key, Kind: kind, At: time.Now(), Rate: 1234.5, Rule: decision.DefaultRule}
}

func TestDeliverySigned(t *testing.T) {
	s, root := setup(t)
	st := webhook.NewStore(s, root)
	signed, plain := newReceiver(t, nil), newReceiver(t, nil)
	d, reg := runDispatcher(t, s, webhook.Config{Root: root, Shard: "n1"})
	if err := st.Put(t.Context(), "shop", webhook.Subscription{Name: "signed", URL: signed.URL + "/hook", Secret: "k3y"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "shop", webhook.Subscription{Name: "plain", URL: plain.URL}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "both subscriptions followed", func() bool { return metric(t, reg, "hotspot_webhook_subscriptions", "") == 2 })

	dec := newDecision("shop", "item:42", decision.Promoted)
	dec.Sources = []decision.SourceShare{{Source: "web-1", Share: 0.7}, {Source: "web-2", Share: 0.25}}
	d.Record([]decision.Decision{dec, newDecision("other", "x", decision.Promoted)})
	got := signed.next(t, 5*time.Second)
	want := webhook.Event{V: 1, App: "shop", Key: "item:42", Kind: "promoted", At: dec.At.UTC(), Rate: 1234.5, Rule: -1, Shard: "n1"}
	if !got.ev.At.Equal(want.At) || got.ev.V != 1 || got.ev.App != want.App || got.ev.Key != want.Key || got.ev.Kind != want.Kind ||
		got.ev.Rate != want.Rate || got.ev.Rule != want.Rule || got.ev.Shard != want.Shard {
		t.Errorf("event = %+v, want %+v", got.ev, want)
	}
	if !strings.Contains(string(got.body), `"sources":[{"source":"web-1","share":0.7},{"source":"web-2","share":0.25}]`) {
		t.Errorf("promotion body %s lacks its sources", got.body)
	}
	if !webhook.Verify("k3y", got.body, got.sig) || webhook.Verify("wrong", got.body, got.sig) || !strings.HasPrefix(got.sig, "sha256=") {
		t.Errorf("signature %q does not verify with the secret (or verifies with another)", got.sig)
	}
	if got.kind != "promoted" || got.delivery == "" {
		t.Errorf("headers: event %q, delivery %q", got.kind, got.delivery)
	}
	p := plain.next(t, 5*time.Second)
	if p.sig != "" || p.ev.Key != "item:42" {
		t.Errorf("unsigned subscription got signature %q, event %+v", p.sig, p.ev)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(signed.requests()) + len(plain.requests()); n != 2 {
		t.Errorf("receivers got %d requests, want 2 (the other app's event goes to nobody)", n)
	}

	// Removing a subscription stops its deliveries.
	if err := st.Delete(t.Context(), "shop", "plain"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the removal followed", func() bool { return metric(t, reg, "hotspot_webhook_subscriptions", "") == 1 })
	d.Record([]decision.Decision{newDecision("shop", "item:42", decision.Demoted)})
	if got := signed.next(t, 5*time.Second); got.ev.Kind != "demoted" || strings.Contains(string(got.body), `"sources"`) {
		t.Errorf("second event = %s, want the demotion without sources", got.body)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(plain.requests()); n != 1 {
		t.Errorf("removed subscription got %d requests, want still 1", n)
	}
}

func TestRetryAfterReceiverFails(t *testing.T) {
	s, root := setup(t)
	// 500, 503, then success; a 400 is not retried.
	r := newReceiver(t, func(n int) int { return map[int]int{1: 500, 2: 503, 4: 400}[n] })
	d, reg := runDispatcher(t, s, webhook.Config{Root: root, Backoff: 50 * time.Millisecond})
	if err := webhook.NewStore(s, root).Put(t.Context(), "shop", webhook.Subscription{Name: "r", URL: r.URL}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the subscription followed", func() bool { return metric(t, reg, "hotspot_webhook_subscriptions", "") == 1 })
	start := time.Now()
	d.Record([]decision.Decision{newDecision("shop", "k", decision.Promoted)})
	got := r.next(t, 10*time.Second)
	reqs := r.requests()
	if len(reqs) != 3 || reqs[0].delivery != got.delivery || reqs[1].delivery != got.delivery {
		t.Fatalf("requests = %d, want 3 with one delivery id", len(reqs))
	}
	// Backoff: 25..50ms, then 50..100ms.
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 25*time.Millisecond {
		t.Errorf("first retry %v after the failure, want >= 25ms", gap)
	}
	if gap := reqs[2].at.Sub(reqs[1].at); gap < 50*time.Millisecond {
		t.Errorf("second retry %v after the failure, want >= 50ms (doubled)", gap)
	}
	t.Logf("delivered after 2 failures in %v", time.Since(start))
	waitFor(t, 5*time.Second, "attempts counted: 1 ok, 2 errors", func() bool {
		return metric(t, reg, "hotspot_webhook_attempts_total", "ok") == 1 && metric(t, reg, "hotspot_webhook_attempts_total", "error") == 2
	})
	d.Record([]decision.Decision{newDecision("shop", "k", decision.Demoted)})
	waitFor(t, 5*time.Second, "the refused event counted", func() bool {
		return metric(t, reg, "hotspot_webhook_undelivered_total", "failed") == 1
	})
	if n := len(r.requests()); n != 4 {
		t.Errorf("requests after a 400 = %d, want 4 (no retry)", n)
	}
}

func TestDeadReceiverDelaysNobody(t *testing.T) {
	s, root := setup(t)
	release := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hangs until the attempt times out
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer dead.Close()
	defer close(release)
	live := newReceiver(t, nil)
	d, reg := runDispatcher(t, s, webhook.Config{Root: root, Queue: 200, Timeout: 200 * time.Millisecond, MaxAttempts: 2})
	st := webhook.NewStore(s, root)
	for _, sub := range []webhook.Subscription{{Name: "dead", URL: dead.URL}, {Name: "live", URL: live.URL}} {
		if err := st.Put(t.Context(), "shop", sub); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "both subscriptions followed", func() bool { return metric(t, reg, "hotspot_webhook_subscriptions", "") == 2 })

	// Two bursts, each within the live receiver's queue: the dead one's
	// queue (200, plus one in flight) overflows in the second.
	start := time.Now()
	for _, n := range []int{150, 100} {
		burst := time.Now()
		for range n {
			d.Record([]decision.Decision{newDecision("shop", "k", decision.Promoted)})
		}
		if took := time.Since(burst); took > 50*time.Millisecond {
			t.Errorf("Record of %d events took %v with a dead receiver, want it not to wait", n, took)
		}
		for i := range n {
			select {
			case <-live.ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("live receiver got %d of %d events", i, n)
			}
		}
	}
	t.Logf("live receiver got all 250 events in %v", time.Since(start))
	if full := metric(t, reg, "hotspot_webhook_undelivered_total", "queue_full"); full < 250-201 {
		t.Errorf("undelivered{queue_full} = %v, want >= %d", full, 250-201)
	}
	waitFor(t, 10*time.Second, "the dead receiver's first event to fail", func() bool {
		return metric(t, reg, "hotspot_webhook_undelivered_total", "failed") >= 1
	})
}
