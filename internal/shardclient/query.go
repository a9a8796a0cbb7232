package shardclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/hotspot-dev/hotspot/router"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// maxAnswerBytes bounds one shard's answer to a query.
const maxAnswerBytes = 8 << 20

// errNotTracked is a shard's 404 to KeyPath: the key is not tracked there.
var errNotTracked = errors.New("not tracked")

// Top asks every member for app's n busiest keys and merges the answers,
// busiest first (ties by key), at most n. Each key has one owner, so the
// shards' lists are disjoint. The error names the members that did not
// answer (wrapping shardapi.ErrNoAnswer when none did); the keys of those
// that did are returned with it.
func (c *Client) Top(ctx context.Context, app string, n int) ([]shardapi.KeyState, error) {
	q := url.Values{"app": {app}, "n": {strconv.Itoa(n)}}
	keys := []shardapi.KeyState{}
	var mu sync.Mutex // guards keys
	err := c.fanOut(ctx, shardapi.TopPath, q, func(body []byte) error {
		var top shardapi.Top
		if err := json.Unmarshal(body, &top); err != nil {
			return err
		}
		mu.Lock()
		keys = append(keys, top.Keys...)
		mu.Unlock()
		return nil
	})
	slices.SortFunc(keys, func(x, y shardapi.KeyState) int {
		return cmp.Or(cmp.Compare(y.Rate, x.Rate), cmp.Compare(x.Key, y.Key))
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys, err
}

// RuleTop asks every member for app's n busiest keys that follow the app's
// rule number rule (and the member's hot keys of that rule) and returns
// each answering member's Top, in no particular order. The error names the
// members that did not answer.
func (c *Client) RuleTop(ctx context.Context, app string, rule, n int) ([]shardapi.Top, error) {
	q := url.Values{"app": {app}, "n": {strconv.Itoa(n)}, "rule": {strconv.Itoa(rule)}}
	var tops []shardapi.Top
	var mu sync.Mutex // guards tops
	err := c.fanOut(ctx, shardapi.TopPath, q, func(body []byte) error {
		var top shardapi.Top
		if err := json.Unmarshal(body, &top); err != nil {
			return err
		}
		mu.Lock()
		tops = append(tops, top)
		mu.Unlock()
		return nil
	})
	return tops, err
}

// Key asks every member for (app, key) and returns the state at the member
// that tracks it, and false when none does. The error names the members that
// did not answer; an answer found elsewhere is returned with it.
func (c *Client) Key(ctx context.Context, app, key string) (shardapi.KeyState, bool, error) {
	var (
		mu    sync.Mutex // guards st and found
		st    shardapi.KeyState
		found bool
	)
	err := c.fanOut(ctx, shardapi.KeyPath, url.Values{"app": {app}, "key": {key}}, func(body []byte) error {
		var ks shardapi.KeyState
		if err := json.Unmarshal(body, &ks); err != nil {
			return err
		}
		mu.Lock()
		if !found {
			st, found = ks, true
		}
		mu.Unlock()
		return nil
	})
	return st, found, err
}

// Effects asks every member for the effect it holds of app's keys (of
// every app when app is "") and returns them, in no particular order. Each
// key has one owner, so the members' lists are disjoint. The error names
// the members that did not answer; the keys of those that did are returned
// with it.
func (c *Client) Effects(ctx context.Context, app string) ([]shardapi.KeyEffectRates, error) {
	q := url.Values{}
	if app != "" {
		q.Set("app", app)
	}
	var keys []shardapi.KeyEffectRates
	var mu sync.Mutex // guards keys
	err := c.fanOut(ctx, shardapi.EffectsPath, q, func(body []byte) error {
		var e shardapi.Effects
		if err := json.Unmarshal(body, &e); err != nil {
			return err
		}
		mu.Lock()
		keys = append(keys, e.Keys...)
		mu.Unlock()
		return nil
	})
	return keys, err
}

// Instances asks every member for the effect of app's instances (of every
// app's when app is "") and returns them, summed per instance, in no
// particular order. An instance's reports go to one member, or to two for
// a while when the ring changes. The error names the members that did not
// answer; the instances of those that did are returned with it.
func (c *Client) Instances(ctx context.Context, app string) ([]shardapi.InstanceEffectRates, error) {
	q := url.Values{}
	if app != "" {
		q.Set("app", app)
	}
	type name struct{ app, instance string }
	at := make(map[name]int)
	var out []shardapi.InstanceEffectRates
	var mu sync.Mutex // guards at and out
	err := c.fanOut(ctx, shardapi.InstancesPath, q, func(body []byte) error {
		var in shardapi.Instances
		if err := json.Unmarshal(body, &in); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range in.Instances {
			n := name{e.App, e.Instance}
			i, ok := at[n]
			if !ok {
				at[n] = len(out)
				out = append(out, e)
				continue
			}
			x := &out[i].Effect
			x.L1Hits += e.Effect.L1Hits
			x.L2Reads += e.Effect.L2Reads
			x.SourceLoads += e.Effect.SourceLoads
			x.Limited += e.Effect.Limited
		}
		return nil
	})
	return out, err
}

// fanOut GETs path?q from every member in parallel and hands each 200
// answer to decode. A 404 to KeyPath is an answer, not a failure.
func (c *Client) fanOut(ctx context.Context, path string, q url.Values, decode func([]byte) error) error {
	members := c.Members()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			body, err := c.get(ctx, m, path, q)
			if err == nil {
				err = decode(body)
			}
			if err != nil && !errors.Is(err, errNotTracked) {
				errs[i] = fmt.Errorf("aggregator %s at %s: %w", m.ID, m.Addr, err)
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	switch {
	case err == nil:
		return nil
	case !slices.Contains(errs, nil):
		return fmt.Errorf("shardclient: %s: %w: %w", path, shardapi.ErrNoAnswer, err)
	}
	return fmt.Errorf("shardclient: %s: %w", path, err)
}

func (c *Client) get(ctx context.Context, m router.Node, path string, q url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+m.Addr+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusNotFound && path == shardapi.KeyPath:
		return nil, errNotTracked
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return body, nil
}
