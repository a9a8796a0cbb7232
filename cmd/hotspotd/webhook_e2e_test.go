package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/webhook"
)

// hookReceiver keeps the verified events an httptest server receives.
type hookReceiver struct {
	mu     sync.Mutex
	events []webhook.Event
	at     map[string]time.Time // kind/key -> first arrival
	bad    []string             // deliveries whose signature did not verify
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	var ev webhook.Event
	if !webhook.Verify("e2e-hook", body, r.Header.Get(webhook.SignatureHeader)) || json.Unmarshal(body, &ev) != nil {
		h.bad = append(h.bad, string(body))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.events = append(h.events, ev)
	if _, ok := h.at[ev.Kind+"/"+ev.Key]; !ok {
		h.at[ev.Kind+"/"+ev.Key] = time.Now()
	}
}

func (h *hookReceiver) count(kind string) (n int, keys map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys = map[string]int{}
	for _, ev := range h.events {
		if ev.Kind == kind {
			n++
			keys[ev.Key]++
		}
	}
	return n, keys
}

// adminCall sends an admin call with the given authorization and returns the status.
func adminCall(t *testing.T, method, url, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebhooks: subscriptions made through one hotspotd's admin API reach
// the aggregators of the cluster; a live receiver gets each promotion and
// demotion once, signed; a receiver that never answers delays neither
// detection nor the live receiver.
func TestWebhooks(t *testing.T) {
	c := newCluster(t, 4)
	p1, p2 := c.start("w1"), c.start("w2")
	w := c.watch(t)

	live := &hookReceiver{at: map[string]time.Time{}}
	liveSrv := httptest.NewServer(live)
	defer liveSrv.Close()
	release := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers: every attempt runs into its timeout
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer dead.Close()
	defer close(release)

	base := "http://" + p1.addr + "/v1/webhooks/"
	for _, tt := range []struct {
		method, url, auth, body string
		want                    int
	}{
		{"PUT", base + "live?app=shop", "", `{"url":"` + liveSrv.URL + `"}`, 401},
		{"PUT", base + "live?app=shop", "Bearer wrong", `{"url":"` + liveSrv.URL + `"}`, 401},
		{"GET", "http://" + p1.addr + "/v1/webhooks?app=shop", "", "", 401},
		{"DELETE", base + "live?app=shop", "", "", 401},
		{"PUT", base + "dead?app=shop", "Bearer e2e-secret", `{"url":"` + dead.URL + `"}`, 204},
		{"PUT", base + "live?app=shop", "Bearer e2e-secret", `{"url":"` + liveSrv.URL + `/hook","secret":"e2e-hook"}`, 204},
	} {
		if got := adminCall(t, tt.method, tt.url, tt.auth, tt.body); got != tt.want {
			t.Fatalf("%s %s (auth %q) = %d, want %d", tt.method, tt.url, tt.auth, got, tt.want)
		}
	}
	var list struct {
		Webhooks []struct {
			Name   string `json:"name"`
			Signed bool   `json:"signed"`
		} `json:"webhooks"`
	}
	req, _ := http.NewRequest("GET", "http://"+p2.addr+"/v1/webhooks?app=shop", nil)
	req.Header.Set("Authorization", "Bearer e2e-secret")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
	}
	if len(list.Webhooks) != 2 || list.Webhooks[0].Name != "dead" || list.Webhooks[1].Name != "live" || !list.Webhooks[1].Signed {
		t.Fatalf("subscriptions listed by the other process = %+v, want dead and live (signed)", list.Webhooks)
	}
	for _, p := range []*proc{p1, p2} {
		waitFor(t, 10*time.Second, p.id+" to follow both subscriptions", func() bool {
			return strings.Contains(scrape(t, p.addr), "hotspot_webhook_subscriptions 2")
		})
	}

	const n = 5
	rates := map[string]float64{}
	for i := range n {
		rates[fmt.Sprintf("hook:%d", i)] = 3000
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	prod := newProducer(t, c.brokers, c.topic, true)
	wg.Go(func() { prod.run(ctx, t, rates, 1000) })
	seen := map[string]time.Time{}
	waitFor(t, 20*time.Second, "every key in ZooKeeper", func() bool {
		for k := range rates {
			if _, ok := w.Snapshot().Key("shop", k); ok && seen[k].IsZero() {
				seen[k] = time.Now()
			}
		}
		return len(seen) == n
	})
	for k, at := range seen {
		crossed, ok := prod.crossing(k, 1000)
		if !ok {
			t.Fatalf("%s never reached 1000/s in the send log", k)
		}
		// TestFlashCrowd's bound, with a dead receiver subscribed.
		if delay := at.Sub(crossed); delay > 1500*time.Millisecond {
			t.Errorf("%s: detection delay %v with a dead webhook receiver, want <= 1.5s", k, delay)
		}
	}
	waitFor(t, 10*time.Second, "every promotion at the live receiver", func() bool { got, _ := live.count("promoted"); return got >= n })
	for k, at := range seen {
		live.mu.Lock()
		d := live.at["promoted/"+k].Sub(at)
		live.mu.Unlock()
		t.Logf("%s: webhook %v after this test noticed the change (it polls every 20ms)", k, d)
		if d > 2*time.Second {
			t.Errorf("%s: webhook arrived %v after the ZooKeeper change, want <= 2s", k, d)
		}
	}
	cancel()
	wg.Wait()
	waitFor(t, 20*time.Second, "every demotion at the live receiver", func() bool { got, _ := live.count("demoted"); return got >= n })
	time.Sleep(500 * time.Millisecond) // room for a duplicate to show up
	for _, kind := range []string{"promoted", "demoted"} {
		got, keys := live.count(kind)
		if got != n || len(keys) != n {
			t.Errorf("%s events at the live receiver = %d over keys %v, want each of the %d keys once", kind, got, keys, n)
		}
	}
	live.mu.Lock()
	defer live.mu.Unlock()
	if len(live.bad) > 0 {
		t.Errorf("deliveries with a bad signature: %q", live.bad)
	}
	for _, ev := range live.events {
		if ev.App != "shop" || ev.Rule != -1 || (ev.Shard != "w1" && ev.Shard != "w2") || (ev.Kind == "promoted" && ev.Rate < 1000) {
			t.Errorf("event %+v: want app shop, rule -1, shard w1 or w2, promotion rate >= 1000", ev)
		}
	}
}

// scrape returns the metrics text of the hotspotd at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
