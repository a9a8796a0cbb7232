package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// /v1/hotkeys lists the hot set published in ZooKeeper, which says nothing
// of the effect: each hot key's served_l1 comes from the shards' effect
// (shardapi.EffectsPath), one GET per shard for all the keys of the answer. The
// answers are reused for effectTTL, so however often /v1/hotkeys is asked,
// a hotspotd queries each shard at most once a second per app (and once for
// all apps); the effect is summed over 10 s anyway. A shard that has not
// answered within effectTimeout leaves its keys without served_l1 until the
// next query.
const (
	effectTTL     = time.Second
	effectTimeout = 250 * time.Millisecond
	// maxEffectApps bounds the apps whose answers are kept.
	maxEffectApps = 64
)

type appKey struct{ app, key string }

// effectCache keeps the shards' last effect answers per app asked.
type effectCache struct {
	mu      sync.Mutex // serializes queries: a second request waits for the first's; guards the fields below
	byApp   map[string]effectAnswer
	failing bool // the last query missed a shard (logged once until one answers in full)
}

type effectAnswer struct {
	at    time.Time
	rates map[appKey]shardapi.EffectRates
}

// effects returns the effect rates of app's keys ("": every app's), from
// the cache when fresh.
func (a *server) effects(ctx context.Context, app string) map[appKey]shardapi.EffectRates {
	c := &a.eff
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byApp[app]; ok && time.Since(e.at) < effectTTL {
		return e.rates
	}
	// A request that goes away does not cut the query short for the
	// others waiting on it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), effectTimeout)
	defer cancel()
	keys, err := a.cfg.Aggregators.Effects(ctx, app)
	switch {
	case err != nil && !c.failing:
		a.log.Warn("served_l1 of some hot keys missing: aggregators did not answer", "err", err)
		c.failing = true
	case err == nil && c.failing:
		a.log.Info("every aggregator answers for served_l1 again")
		c.failing = false
	}
	rates := make(map[appKey]shardapi.EffectRates, len(keys))
	for _, k := range keys {
		rates[appKey{k.App, k.Key}] = k.Effect
	}
	if c.byApp == nil || len(c.byApp) >= maxEffectApps {
		c.byApp = make(map[string]effectAnswer)
	}
	c.byApp[app] = effectAnswer{at: time.Now(), rates: rates}
	return rates
}

// servedL1 sets the served_l1 of the hot keys of apps, asked as app
// ("" for every app).
func (a *server) servedL1(ctx context.Context, app string, apps []hotspotapi.AppHotKeys) {
	n := 0
	for _, ah := range apps {
		n += len(ah.HotKeys)
	}
	if n == 0 {
		return
	}
	rates := a.effects(ctx, app)
	for _, ah := range apps {
		for i := range ah.HotKeys {
			k := &ah.HotKeys[i]
			if f, ok := rates[appKey{ah.App, k.Key}].ServedL1(); ok {
				k.ServedL1 = &f
			}
		}
	}
}
