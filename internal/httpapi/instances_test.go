package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// instanceAggregators answers Instances with three instances of two apps,
// or none; with an error naming a shard when failed is set, which says no
// shard answered when there are none.
type instanceAggregators struct {
	noAggregators
	failed bool
	none   bool
}

func (f instanceAggregators) Instances(_ context.Context, app string) ([]shardapi.InstanceEffectRates, error) {
	var err error
	if f.failed {
		err = errors.New("aggregator s2 at 127.0.0.1:1: connection refused")
	}
	if f.none {
		if f.failed {
			err = fmt.Errorf("%w: %w", shardapi.ErrNoAnswer, err)
		}
		return nil, err
	}
	in := []shardapi.InstanceEffectRates{
		{App: "shop", Instance: "proxy-a", Effect: shardapi.EffectRates{L1Hits: 900, L2Reads: 50, Limited: 50}},
		{App: "shop", Instance: "web-1", Effect: shardapi.EffectRates{L1Hits: 9000, L2Reads: 1000}},
		{App: "ads", Instance: "proxy-a", Effect: shardapi.EffectRates{SourceLoads: 2}}, // no reads: no served_l1
	}
	if app != "" {
		in = slices.DeleteFunc(in, func(e shardapi.InstanceEffectRates) bool { return e.App != app })
	}
	return in, err
}

// partlyEmpty is a cluster where one shard failed and the others answered
// with nothing.
type partlyEmpty struct{ noAggregators }

func (partlyEmpty) Instances(context.Context, string) ([]shardapi.InstanceEffectRates, error) {
	return nil, errors.New("aggregator s2 at 127.0.0.1:1: connection refused")
}

// TestInstancesRoute: /v1/instances lists the instances by app, the busiest
// first, with their rates and served_l1; ?app= keeps one app's; a cluster
// where no shard answered is a 502, one where some did lists theirs.
func TestInstancesRoute(t *testing.T) {
	get := func(agg Aggregators, target string) (int, string) {
		h, err := New(Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: agg})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get(instanceAggregators{}, "/v1/instances")
	var got hotspotapi.Instances
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 {
		t.Fatalf("GET /v1/instances: %d %s", code, body)
	}
	var order []string
	for _, in := range got.Instances {
		order = append(order, in.App+"/"+in.Instance)
	}
	if want := []string{"ads/proxy-a", "shop/web-1", "shop/proxy-a"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	for _, frag := range []string{`"instance": "proxy-a"`, `"l1_hits": 900`, `"l2_reads": 50`, `"limited": 50`, `"served_l1": 0.9`} {
		if !strings.Contains(body, frag) {
			t.Errorf("answer lacks %s:\n%s", frag, body)
		}
	}
	if got.Instances[0].ServedL1 != nil {
		t.Errorf("an instance without reads has served_l1 %v", *got.Instances[0].ServedL1)
	}
	if code, body := get(instanceAggregators{}, "/v1/instances?app=ads"); code != 200 || strings.Contains(body, "shop") || !strings.Contains(body, "proxy-a") {
		t.Errorf("?app=ads: %d %s", code, body)
	}
	if code, _ := get(instanceAggregators{}, "/v1/instances?app="); code != 400 {
		t.Errorf("?app= empty: %d, want 400", code)
	}
	if code, body := get(instanceAggregators{failed: true}, "/v1/instances?app=shop"); code != 200 || !strings.Contains(body, "web-1") {
		t.Errorf("one shard failed: %d %s, want the others' instances", code, body)
	}
	if code, body := get(instanceAggregators{failed: true, none: true}, "/v1/instances"); code != 502 || !strings.Contains(body, "aggregator s2") {
		t.Errorf("no shard answered: %d %s, want 502 naming it", code, body)
	}
	if code, body := get(partlyEmpty{}, "/v1/instances"); code != 200 || !strings.Contains(body, `"instances": []`) {
		t.Errorf("one shard failed, the other has no instance: %d %s, want 200 and none", code, body)
	}
	if code, body := get(noAggregators{}, "/v1/instances"); code != 200 || !strings.Contains(body, `"instances": []`) {
		t.Errorf("no instances: %d %s", code, body)
	}
}
