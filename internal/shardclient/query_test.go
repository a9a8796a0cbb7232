package shardclient_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// topServer answers TopPath with keys, as a shard does.
func topServer(t *testing.T, id string, keys ...shardapi.KeyState) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != shardapi.TopPath || r.URL.Query().Get("app") != "shop" {
			httpjson.Error(w, http.StatusBadRequest, "unexpected "+r.URL.String())
			return
		}
		httpjson.Write(w, http.StatusOK, shardapi.Top{App: "shop", Shard: id, Keys: keys})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func members(srvs map[string]*httptest.Server) map[string][]byte {
	m := make(map[string][]byte)
	for id, s := range srvs {
		m[id] = hotset.EncodeMember(hotset.Member{ID: id, Addr: strings.TrimPrefix(s.URL, "http://")})
	}
	return m
}

func TestTopMergesShards(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Error(w, http.StatusInternalServerError, "boom")
	}))
	defer failing.Close()
	a := topServer(t, "a", shardapi.KeyState{App: "shop", Key: "k1", Rate: 300}, shardapi.KeyState{App: "shop", Key: "k3", Rate: 100})
	b := topServer(t, "b", shardapi.KeyState{App: "shop", Key: "k2", Rate: 200, Hot: true}, shardapi.KeyState{App: "shop", Key: "k0", Rate: 100})
	tests := []struct {
		name    string
		shards  map[string]*httptest.Server
		n       int
		want    string // keys and rates, busiest first
		wantErr bool
		none    bool // no shard answered: the error wraps ErrNoAnswer
	}{
		{"two shards", map[string]*httptest.Server{"a": a, "b": b}, 10, "k1:300 k2:200 k0:100 k3:100", false, false},
		{"at most n", map[string]*httptest.Server{"a": a, "b": b}, 2, "k1:300 k2:200", false, false},
		{"one shard fails", map[string]*httptest.Server{"a": a, "x": failing}, 10, "k1:300 k3:100", true, false},
		{"one shard fails, the other has none", map[string]*httptest.Server{"e": topServer(t, "e"), "x": failing}, 10, "", true, false},
		{"every shard fails", map[string]*httptest.Server{"x": failing}, 10, "", true, true},
		{"no shard", nil, 10, "", false, false},
	}
	for _, tt := range tests {
		c := newClient(t)
		c.SetMembers(members(tt.shards))
		keys, err := c.Top(t.Context(), "shop", tt.n)
		var got []string
		for _, k := range keys {
			got = append(got, fmt.Sprintf("%s:%g", k.Key, k.Rate))
		}
		if strings.Join(got, " ") != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: got %q, err %v; want %q, error %v", tt.name, strings.Join(got, " "), err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "aggregator x") {
			t.Errorf("%s: error %q does not name the failed shard", tt.name, err)
		}
		if errors.Is(err, shardapi.ErrNoAnswer) != tt.none {
			t.Errorf("%s: error %v wraps ErrNoAnswer: %v, want %v", tt.name, err, !tt.none, tt.none)
		}
	}
}

// TestKeyAsksTheOwner sends counts through real aggregators and reads one
// key's state back: only its owner tracks it.
func TestKeyAsksTheOwner(t *testing.T) {
	s1, s2 := newShard(t, "s1"), newShard(t, "s2")
	c := newClient(t)
	c.SetMembers(map[string][]byte{"s1": s1.member(), "s2": s2.member()})
	if err := c.Send(t.Context(), shardapi.Flush{At: time.Now()}, []shardapi.Count{{App: "shop", Key: "item:1", N: 7}}); err != nil {
		t.Fatal(err)
	}
	st, found, err := c.Key(t.Context(), "shop", "item:1")
	if err != nil || !found || st.Key != "item:1" || st.App != "shop" || st.Rate <= 0 {
		t.Errorf("Key(item:1) = %+v, %v, %v; want its state at the owner", st, found, err)
	}
	st, found, err = c.Key(t.Context(), "shop", "never-sent")
	if err != nil || found {
		t.Errorf("Key(never-sent) = %+v, %v, %v; want not found and no error", st, found, err)
	}
	s2.srv.Close()
	if _, _, err := c.Key(t.Context(), "shop", "item:1"); err == nil || !strings.Contains(err.Error(), "aggregator s2") {
		t.Errorf("Key with shard s2 down: err %v, want one naming s2", err)
	}
}

// TestInstancesSumsShards: an instance that two shards hold (its reports
// moved with the ring) is answered once, its rates summed; the error names
// a shard that failed, and the others' instances come with it.
func TestInstancesSumsShards(t *testing.T) {
	shard := func(id string, in ...shardapi.InstanceEffectRates) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != shardapi.InstancesPath || r.URL.Query().Get("app") != "shop" {
				httpjson.Error(w, http.StatusBadRequest, "unexpected "+r.URL.String())
				return
			}
			httpjson.Write(w, http.StatusOK, shardapi.Instances{Shard: id, Instances: in})
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Error(w, http.StatusInternalServerError, "boom")
	}))
	defer failing.Close()
	a := shard("a", shardapi.InstanceEffectRates{App: "shop", Instance: "pod-1", Effect: shardapi.EffectRates{L1Hits: 90, L2Reads: 1}},
		shardapi.InstanceEffectRates{App: "shop", Instance: "pod-2", Effect: shardapi.EffectRates{L1Hits: 10}})
	b := shard("b", shardapi.InstanceEffectRates{App: "shop", Instance: "pod-1", Effect: shardapi.EffectRates{L1Hits: 10, Limited: 2}})
	c := newClient(t)
	c.SetMembers(members(map[string]*httptest.Server{"a": a, "b": b, "x": failing}))
	got, err := c.Instances(t.Context(), "shop")
	if err == nil || !strings.Contains(err.Error(), "aggregator x") {
		t.Errorf("error %v, want one naming aggregator x", err)
	}
	by := map[string]shardapi.EffectRates{}
	for _, in := range got {
		if _, dup := by[in.Instance]; dup {
			t.Errorf("%s answered twice", in.Instance)
		}
		by[in.Instance] = in.Effect
	}
	want := map[string]shardapi.EffectRates{"pod-1": {L1Hits: 100, L2Reads: 1, Limited: 2}, "pod-2": {L1Hits: 10}}
	if fmt.Sprint(by) != fmt.Sprint(want) {
		t.Errorf("instances %v, want %v", by, want)
	}
}
