package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"slices"

	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// Instance is one entry of /v1/instances: what one app instance (an SDK
// Client, or an app of a sidecar proxy) did with the reads of its hot keys
// over the effect window, per second, as it reported them.
type Instance struct {
	App      string `json:"app"`
	Instance string `json:"instance"`
	shardapi.EffectRates
	// ServedL1 is l1_hits / (l1_hits + l2_reads + limited); absent when
	// the instance reported no reads.
	ServedL1 *float64 `json:"served_l1,omitempty"`
}

// Instances is the answer of /v1/instances.
type Instances struct {
	Instances []Instance `json:"instances"`
}

// instances answers /v1/instances[?app=]: the instances that reported the
// effect of hot keys over the effect window, by app, the busiest (reads
// per second) first.
func (a *server) instances(w http.ResponseWriter, r *http.Request) {
	var app string
	if r.URL.Query().Has("app") {
		var err error
		if app, err = appParam(r.URL.Query()); err != nil {
			badRequest(w, err)
			return
		}
	}
	got, err := a.cfg.Aggregators.Instances(r.Context(), app)
	if err != nil {
		if errors.Is(err, shardapi.ErrNoAnswer) {
			httpjson.Indent(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		a.log.Warn("instances of some aggregators missing", "app", app, "err", err)
	}
	out := Instances{Instances: make([]Instance, 0, len(got))}
	for _, in := range got {
		e := Instance{App: in.App, Instance: in.Instance, EffectRates: in.Effect}
		if f, ok := in.Effect.ServedL1(); ok {
			e.ServedL1 = &f
		}
		out.Instances = append(out.Instances, e)
	}
	reads := func(e Instance) float64 { return e.L1Hits + e.L2Reads + e.Limited }
	slices.SortFunc(out.Instances, func(x, y Instance) int {
		return cmp.Or(cmp.Compare(x.App, y.App), cmp.Compare(reads(y), reads(x)), cmp.Compare(x.Instance, y.Instance))
	})
	httpjson.Indent(w, http.StatusOK, out)
}
