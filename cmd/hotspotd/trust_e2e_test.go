package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/clusterauth"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

const e2eClusterSecret = "e2e-cluster-secret-0123456789"

// TestClusterSecret: two hotspotd sharing a cluster secret detect a flash
// crowd (partials and the API's fan-out cross processes, signed), and each
// forged internal call is refused with 401 and counts nothing.
func TestClusterSecret(t *testing.T) {
	c := newCluster(t, 4)
	secret := filepath.Join(c.dir, "cluster.secret")
	if err := os.WriteFile(secret, []byte(e2eClusterSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.extra = []string{"--cluster-secret-file", secret}
	p1 := c.start("a1")
	c.start("a2")
	w := c.watch(t)

	// The pipeline works with signing on.
	ctx, cancel := context.WithCancel(context.Background())
	prod := newProducer(t, c.brokers, c.topic, true)
	var wg sync.WaitGroup
	wg.Go(func() { prod.run(ctx, t, map[string]float64{"item:flash": 3000}, 1000) })
	waitFor(t, 20*time.Second, "item:flash in ZooKeeper", func() bool {
		_, ok := w.Snapshot().Key("shop", "item:flash")
		return ok
	})
	cancel()
	wg.Wait()

	url := "http://" + p1.addr + "/internal/v1/partials"
	evil := wire.AppendPartials(nil, &wire.PartialBatch{Source: "attacker", At: time.Now().UnixMilli(),
		Groups: []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "item:evil", Count: 1 << 62}}}}})
	post := func(t *testing.T, client *http.Client, hdr http.Header) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url, bytes.NewReader(evil))
		req.Header.Set("Content-Type", "application/octet-stream")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good, err := clusterauth.NewSigner([]byte(e2eClusterSecret), "e2e-test")
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := clusterauth.NewSigner([]byte("not-the-cluster-secret-at-all"), "e2e-test")

	t.Run("unsigned partials", func(t *testing.T) {
		if code := post(t, http.DefaultClient, nil); code != http.StatusUnauthorized {
			t.Errorf("unsigned POST = %d, want 401", code)
		}
	})
	t.Run("wrongly signed partials", func(t *testing.T) {
		if code := post(t, &http.Client{Transport: wrong.Transport(nil)}, nil); code != http.StatusUnauthorized {
			t.Errorf("POST signed with another secret = %d, want 401", code)
		}
	})
	t.Run("evil key not counted", func(t *testing.T) {
		// Ask both shards, signed, about the key the forged batches named.
		signed := &http.Client{Transport: good.Transport(nil)}
		for _, p := range []string{p1.addr} {
			resp, err := signed.Get("http://" + p + "/internal/v1/key?app=shop&key=item:evil")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("item:evil at %s: %d, want 404 (never counted)", p, resp.StatusCode)
			}
		}
		if _, ok := w.Snapshot().Key("shop", "item:evil"); ok {
			t.Errorf("item:evil is hot")
		}
	})
	t.Run("replayed partials", func(t *testing.T) {
		small := wire.AppendPartials(nil, &wire.PartialBatch{Source: "e2e", At: time.Now().UnixMilli(),
			Groups: []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "item:replayed", Count: 1}}}}})
		var captured http.Header
		capture := &http.Client{Transport: good.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			captured = r.Header.Clone()
			return http.DefaultTransport.RoundTrip(r)
		}))}
		send := func(client *http.Client, hdr http.Header) int {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(small))
			req.Header.Set("Content-Type", "application/octet-stream")
			for k, v := range hdr {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := send(capture, nil); code != http.StatusNoContent {
			t.Fatalf("signed POST = %d, want 204", code)
		}
		if code := send(http.DefaultClient, captured); code != http.StatusUnauthorized {
			t.Errorf("replayed POST = %d, want 401", code)
		}
	})
	t.Run("admin write without the token", func(t *testing.T) {
		req, _ := http.NewRequest("PUT", "http://"+p1.addr+"/v1/pins/item:x?app=shop", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("PUT pin without token = %d, want 401", resp.StatusCode)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSaturatedCount: counts that sum past 2^64-1 on one partition (twice
// the largest count, then 2) are published at the saturated rate, about
// 1.8e19/s, never wrapped to 0 on the way (detector spread, partials,
// shard placement, rate).
func TestSaturatedCount(t *testing.T) {
	c := newCluster(t, 1)
	p := c.start("s1")
	w := newProducer(t, c.brokers, c.topic, false).w
	var msgs []kafka.Message
	for _, n := range []string{"18446744073709551615", "18446744073709551615", "2"} {
		msgs = append(msgs, kafka.Message{Value: []byte(`{"app":"shop","key":"trust:maxcount","count":` + n + `}`)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	var rate float64
	waitFor(t, 10*time.Second, "trust:maxcount listed", func() bool {
		var out struct {
			Apps []struct {
				App     string `json:"app"`
				HotKeys []struct {
					Key  string  `json:"key"`
					Rate float64 `json:"rate"`
				} `json:"hotkeys"`
			} `json:"apps"`
		}
		getJSON(t, "http://"+p.addr+"/v1/hotkeys", &out)
		for _, a := range out.Apps {
			for _, k := range a.HotKeys {
				if a.App == "shop" && k.Key == "trust:maxcount" {
					rate = k.Rate
					return true
				}
			}
		}
		return false
	})
	if rate < 1e18 {
		t.Errorf("trust:maxcount listed at %g/s, want the saturated rate (about 1.8e19/s)", rate)
	}
}
