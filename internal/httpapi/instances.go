package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"slices"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/shardapi"
)

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
	out := hotspotapi.Instances{Instances: make([]hotspotapi.Instance, 0, len(got))}
	for _, in := range got {
		e := hotspotapi.Instance{App: in.App, Instance: in.Instance, EffectRates: hotspotapi.EffectRates(in.Effect)}
		if f, ok := in.Effect.ServedL1(); ok {
			e.ServedL1 = &f
		}
		out.Instances = append(out.Instances, e)
	}
	reads := func(e hotspotapi.Instance) float64 { return e.L1Hits + e.L2Reads + e.Limited }
	slices.SortFunc(out.Instances, func(x, y hotspotapi.Instance) int {
		return cmp.Or(cmp.Compare(x.App, y.App), cmp.Compare(reads(y), reads(x)), cmp.Compare(x.Instance, y.Instance))
	})
	httpjson.Indent(w, http.StatusOK, out)
}
