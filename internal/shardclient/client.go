package shardclient

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/router"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// ErrNoMembers is returned by Send when no aggregator is registered.
var ErrNoMembers = errors.New("shardclient: no aggregator members")

// Config tunes a Client. A zero field means its default.
type Config struct {
	Root                string            // ZooKeeper root that Follow watches; "" means hotset.DefaultRoot
	Source              string            // sender id written in each batch; default the host name
	Timeout             time.Duration     // bound on one POST, connect included; 0 means 2s
	MaxIdleConnsPerHost int               // kept-alive connections per aggregator; 0 means 4
	SuspectFor          time.Duration     // how long a failed aggregator is routed around; 0 means 5s
	Transport           http.RoundTripper // nil: a tuned keep-alive *http.Transport owned by the Client
	// TLS, when set, makes the Client call the shards over HTTPS, its own
	// transport verifying them with it (a cluster serves TLS throughout or
	// not at all). A given Transport must be set up for HTTPS itself.
	TLS *tls.Config
	// Wrap, when set, wraps the transport (own or given): hotspotd signs
	// its calls to other hotspotd this way (docs/security.md).
	Wrap func(http.RoundTripper) http.RoundTripper
	// SelfID and Self spare a process that runs a shard too the HTTP round
	// trip to itself: the batches routed to the member whose ID is SelfID
	// go to Self, in-process, with the body a POST would carry (hotspotd
	// running both roles passes its aggregator's TakePartials). Self
	// answers as the shard's handler would: nil once the counts are taken.
	SelfID     string
	Self       func(body []byte) error
	Ring       router.Config // ring parameters; must match every other process's
	Logger     *slog.Logger  // nil discards
	Registerer prometheus.Registerer
}

// Client talks to the aggregator shards: Send routes partial counts to their
// owners (it is the detectors' Sink), Top and Key ask every shard.
// Its methods are safe for concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	table  *router.Table
	http   *http.Client
	own    *http.Transport // nil when the caller supplied Transport
	scheme string          // "http://", or "https://" with Config.TLS
	m      metrics

	// members is the MembersHeader value of the ring, set by SetMembers;
	// selfName is SelfID as it appears there.
	members  atomic.Pointer[string]
	selfName string

	mu      sync.Mutex           // serializes Send; guards the fields below
	owners  map[string]*owner    // by node ID; buffers reused across Sends
	suspect map[string]time.Time // node ID -> until when it is routed around
	selfOut bool                 // SelfID is suspected because a shard's answer left it out
	key     []byte               // ring-key scratch
	order   []router.Node        // LookupN scratch
}

// owner is one aggregator's share of a Send.
type owner struct {
	node  router.Node
	url   string
	batch wire.PartialBatch
	apps  map[string]int // app -> index in batch.Groups
	body  []byte
	used  bool
	idle  int        // consecutive Sends without keys for this owner
	self  selfListed // what the last answer's MembersHeader said of SelfID
}

// selfListed is what one shard's answer said of the sender's own shard.
type selfListed uint8

const (
	selfUnknown selfListed = iota // no MembersHeader, no SelfID, or the answer of SelfID itself
	selfIn
	selfLeftOut
)

// New returns a Client with an empty ring: Send fails with ErrNoMembers until
// SetMembers (or Follow) has seen a member.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, errors.New("shardclient: Timeout and MaxIdleConnsPerHost must be >= 0")
	}
	if cfg.Source == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("shardclient: Source unset and no host name: %w", err)
		}
		cfg.Source = h
	}
	cfg.Root = cmp.Or(cfg.Root, hotset.DefaultRoot)
	cfg.Timeout = cmp.Or(cfg.Timeout, 2*time.Second)
	cfg.MaxIdleConnsPerHost = cmp.Or(cfg.MaxIdleConnsPerHost, 4)
	cfg.SuspectFor = cmp.Or(cfg.SuspectFor, 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if _, err := router.New(nil, cfg.Ring); err != nil {
		return nil, fmt.Errorf("shardclient: ring: %w", err)
	}
	c := &Client{
		cfg:     cfg,
		log:     cfg.Logger,
		table:   router.NewTable(cfg.Ring),
		m:       newMetrics(cfg.Registerer),
		owners:  make(map[string]*owner),
		suspect: make(map[string]time.Time),
	}
	if cfg.SelfID != "" {
		c.selfName = hotset.Escape(cfg.SelfID)
	}
	rt := cfg.Transport
	if rt == nil {
		c.own = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: cfg.Timeout,
			DisableCompression:    true, // small binary bodies on a LAN
			TLSClientConfig:       cfg.TLS,
		}
		rt = c.own
	}
	c.scheme = "http://"
	if cfg.TLS != nil {
		c.scheme = "https://"
	}
	if cfg.Wrap != nil {
		rt = cfg.Wrap(rt)
	}
	c.http = &http.Client{Transport: rt}
	return c, nil
}

// Close closes idle connections of the Client's own transport.
func (c *Client) Close() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// Send routes counts by the ring and POSTs one batch per owner, owners in
// parallel. An owner that fails is suspected down for SuspectFor, and its
// counts go to the key's next node on the ring, the one that takes the key
// over when the dead member leaves; Send retries so until every count was
// accepted. It returns nil only when every count was accepted (2xx);
// otherwise an error naming each failed owner. counts is not kept. Each
// batch carries f's times and a sequence number made of f.Seq and the pass
// (see batchSeq), so that an aggregator applies a retried batch once.
//
// With SelfID set, the answers also say whether the other processes still
// route to this process's own shard (shardapi.MembersHeader): one that has lost its
// ZooKeeper session while the others have not is no longer in their ring,
// though it still is in its own. While most answers that say leave SelfID
// out, SelfID is routed around as a failed shard is, so that its keys'
// counts from this process's detector reach the shards the others now send
// them to; it is routed to again once most answers list it. (Most, not any:
// a shard cut off itself keeps a stale view, in which a member that joined
// since is missing.)
func (c *Client) Send(ctx context.Context, f shardapi.Flush, counts []shardapi.Count) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ring := c.table.Ring() // one view for the whole flush
	if ring.Len() == 0 {
		if len(counts) == 0 {
			return nil
		}
		c.m.requests.WithLabelValues("no_members").Inc()
		return ErrNoMembers
	}
	now := time.Now()
	for id, until := range c.suspect {
		if now.After(until) {
			delete(c.suspect, id)
		}
	}
	for _, o := range c.owners {
		o.reset()
	}
	for _, k := range counts {
		if k.N != 0 {
			c.ownerOf(ring, k.App, k.Key).add(k)
		}
	}
	for _, s := range f.Sources {
		c.ownerOf(ring, s.App, s.Key).addSources(s)
	}
	for _, e := range f.Effects {
		c.ownerOf(ring, e.App, e.Key).addEffect(e)
	}
	// An instance's totals go where its name would as a key: one shard
	// per instance, so that each holds some of them.
	for _, in := range f.Instances {
		c.ownerOf(ring, in.App, in.Instance).addInstance(in)
	}
	// Every live member hears from every Send, an empty batch if it owns
	// none of the counts: aggregators take silence from all detectors for
	// a paused consumer group (see aggregator.Config.Stall). So does this
	// process's own shard while the others leave it out: it owns no key,
	// and its keys' windows empty and its hot keys demote, rather than
	// stalling and publishing them again when its session is back.
	for _, n := range ring.Nodes() {
		if _, down := c.suspect[n.ID]; !down || n.ID == c.cfg.SelfID && c.selfOut {
			c.owner(n).used = true
		}
	}
	var errs []error
	for pass := 0; ; pass++ {
		failed := c.postAll(ctx, f, pass)
		if len(failed) == 0 {
			break
		}
		for _, f := range failed {
			errs = append(errs, f.err)
			c.suspect[f.o.node.ID] = now.Add(c.cfg.SuspectFor)
		}
		if len(c.suspect) >= ring.Len() || ctx.Err() != nil {
			for _, o := range c.owners {
				o.release()
			}
			if len(counts) == 0 {
				return nil // a liveness round carries nothing to lose
			}
			return errors.Join(errs...)
		}
		// Hand the failed owners' counts to each key's next live node.
		for _, o := range c.owners {
			o.reset()
		}
		for _, f := range failed {
			c.reroute(ring, &f.o.batch)
			f.o.release()
		}
		c.m.rerouted.Inc()
	}
	if len(errs) > 0 {
		c.log.Warn("partial counts rerouted around failed aggregators", "err", errors.Join(errs...))
	}
	return nil
}

// reroute hands what a failed owner's batch held to each key's owner now.
func (c *Client) reroute(ring *router.Ring, b *wire.PartialBatch) {
	for _, g := range b.Groups {
		for _, e := range g.Entries {
			c.ownerOf(ring, g.App, e.Key).add(shardapi.Count{App: g.App, Key: e.Key, N: e.Count, Writes: e.Writes, Bytes: e.Bytes, WriteBytes: e.WriteBytes})
		}
	}
	for _, s := range b.Sources {
		o := c.ownerOf(ring, s.App, s.Key)
		o.used = true
		o.batch.Sources = append(o.batch.Sources, s)
	}
	for _, e := range b.Effects {
		o := c.ownerOf(ring, e.App, e.Key)
		o.used = true
		o.batch.Effects = append(o.batch.Effects, e)
	}
	for _, in := range b.Instances {
		o := c.ownerOf(ring, in.App, in.Src)
		o.used = true
		o.batch.Instances = append(o.batch.Instances, in)
	}
}

// ownerOf returns the owner of (app, key): the first node of its ring
// order that is not suspected down.
func (c *Client) ownerOf(ring *router.Ring, app, k string) *owner {
	c.key = append(append(append(c.key[:0], app...), 0), k...)
	// The ring only hashes the key, so a string over the scratch bytes is
	// safe and spares an allocation per count.
	key := unsafe.String(unsafe.SliceData(c.key), len(c.key))
	n, _ := ring.Lookup(key)
	if _, down := c.suspect[n.ID]; down {
		c.order = ring.LookupN(key, ring.Len(), c.order[:0])
		for _, alt := range c.order {
			if _, down := c.suspect[alt.ID]; !down {
				n = alt
				break
			}
		}
	}
	return c.owner(n)
}

type failure struct {
	o   *owner
	err error
}

// batchSeq is the wire sequence of the batches of pass number pass of a
// Send of f: an aggregator applies each (source, sequence) once, so a retry
// of the whole Send (same f, pass 0 again) is dropped where it was applied,
// while the counts a later pass reroutes to an owner that already took pass
// 0 are still counted.
func batchSeq(f shardapi.Flush, pass int) uint64 {
	if f.Seq == 0 {
		return 0 // unnumbered
	}
	return f.Seq<<8 | uint64(min(pass, 255))
}

// postAll posts every used owner's batch in parallel and returns the owners
// that failed, their batches intact; the others' batches are released.
func (c *Client) postAll(ctx context.Context, f shardapi.Flush, pass int) []failure {
	var used []*owner
	for id, o := range c.owners {
		if o.used {
			o.idle = 0
			o.batch.At, o.batch.Span = f.At.UnixMilli(), f.Span.Milliseconds()
			o.batch.End, o.batch.Seq = 0, batchSeq(f, pass)
			o.batch.Step, o.batch.Weights, o.batch.Reach = 0, nil, 0
			if !f.Reach.IsZero() {
				o.batch.Reach = f.Reach.UnixMilli()
			}
			if !f.End.IsZero() {
				o.batch.End = f.End.UnixMilli()
				o.batch.Step, o.batch.Weights = f.Step.Milliseconds(), f.Weights
			}
			o.body = wire.AppendPartials(o.body[:0], &o.batch)
			used = append(used, o)
		} else if o.idle++; o.idle > 100 {
			delete(c.owners, id) // a departed member's buffers
		}
	}
	errs := make([]error, len(used))
	if len(used) == 1 {
		errs[0] = c.post(ctx, used[0])
	} else {
		var wg sync.WaitGroup
		for i, o := range used {
			wg.Go(func() { errs[i] = c.post(ctx, o) })
		}
		wg.Wait()
	}
	var failed []failure
	var in, out int
	for i, o := range used {
		if errs[i] != nil {
			failed = append(failed, failure{o, errs[i]})
			delete(c.owners, o.node.ID) // keep its batch out of the next round's reuse
			continue
		}
		switch o.self {
		case selfIn:
			in++
		case selfLeftOut:
			out++
		}
		o.release()
	}
	c.heardOfSelf(in, out)
	return failed
}

// heardOfSelf follows what the answers of one pass said of SelfID, in of
// them listing it and out leaving it out: routed around while most leave it
// out (the others' view wins over this process's own), routed to again
// once most list it.
func (c *Client) heardOfSelf(in, out int) {
	switch {
	case out > in:
		if !c.selfOut {
			c.log.Warn("the other shards route without this process's own shard; routing its keys as they do", "self", c.cfg.SelfID)
			c.m.selfOut.Set(1)
		}
		c.selfOut = true
		c.suspect[c.cfg.SelfID] = time.Now().Add(c.cfg.SuspectFor)
	case in > out && c.selfOut:
		c.log.Info("the other shards route to this process's own shard again", "self", c.cfg.SelfID)
		c.m.selfOut.Set(0)
		c.selfOut = false
		delete(c.suspect, c.cfg.SelfID)
	}
}

func (c *Client) owner(n router.Node) *owner {
	o := c.owners[n.ID]
	if o == nil {
		o = &owner{apps: make(map[string]int)}
		c.owners[n.ID] = o
	}
	if o.node != n {
		o.node, o.url = n, c.scheme+n.Addr+shardapi.PartialsPath
	}
	o.batch.Source = c.cfg.Source
	return o
}

func (o *owner) reset() {
	o.used = false
	o.batch.Groups = o.batch.Groups[:0]
	o.batch.Sources, o.batch.Effects, o.batch.Instances = o.batch.Sources[:0], o.batch.Effects[:0], o.batch.Instances[:0]
	clear(o.apps)
}

// release drops the references to the caller's strings.
func (o *owner) release() {
	for i := range o.batch.Groups {
		g := &o.batch.Groups[i]
		clear(g.Entries)
		g.Entries, g.App = g.Entries[:0], ""
	}
	o.batch.Groups = o.batch.Groups[:0]
	clear(o.batch.Sources)
	clear(o.batch.Effects)
	clear(o.batch.Instances)
	o.batch.Sources, o.batch.Effects, o.batch.Instances = o.batch.Sources[:0], o.batch.Effects[:0], o.batch.Instances[:0]
}

// addSources adds s to o's batch. Its slices are the caller's, valid until
// Send returns.
func (o *owner) addSources(s shardapi.KeySources) {
	o.used = true
	top := make([]wire.SourceCount, len(s.Top))
	for i, t := range s.Top {
		top[i] = wire.SourceCount{Src: t.Src, N: t.N}
	}
	o.batch.Sources = append(o.batch.Sources, wire.PartialSources{App: s.App, Key: s.Key, Total: s.Total, Top: top, Distinct: s.Distinct})
}

func (o *owner) addEffect(e shardapi.KeyEffect) {
	o.used = true
	o.batch.Effects = append(o.batch.Effects, wire.PartialEffect{App: e.App, Key: e.Key, EffectCounts: effectCounts(e.Effect)})
}

func effectCounts(e shardapi.Effect) wire.EffectCounts {
	return wire.EffectCounts{L1Hits: e.L1Hits, L2Reads: e.L2Reads, SourceLoads: e.SourceLoads, Limited: e.Limited}
}

func (o *owner) addInstance(in shardapi.InstanceEffect) {
	o.used = true
	o.batch.Instances = append(o.batch.Instances, wire.PartialInstance{App: in.App, Src: in.Instance, EffectCounts: effectCounts(in.Effect)})
}

func (o *owner) add(k shardapi.Count) {
	o.used = true
	i, ok := o.apps[k.App]
	if !ok {
		i = len(o.batch.Groups)
		o.apps[k.App] = i
		if i < cap(o.batch.Groups) {
			o.batch.Groups = o.batch.Groups[:i+1] // reuse the slot's Entries
			o.batch.Groups[i].App = k.App
			o.batch.Groups[i].Entries = o.batch.Groups[i].Entries[:0]
		} else {
			o.batch.Groups = append(o.batch.Groups, wire.PartialGroup{App: k.App})
		}
	}
	g := &o.batch.Groups[i]
	g.Entries = append(g.Entries, wire.KeyCount{Key: k.Key, Count: k.N, Writes: k.Writes, Bytes: k.Bytes, WriteBytes: k.WriteBytes})
}

// post sends o's batch and drains the answer so the connection is reused.
func (c *Client) post(ctx context.Context, o *owner) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := c.do(ctx, o)
	c.m.seconds.Observe(time.Since(start).Seconds())
	if err != nil {
		c.m.requests.WithLabelValues("error").Inc()
		return fmt.Errorf("shardclient: aggregator %s at %s: %w", o.node.ID, o.node.Addr, err)
	}
	c.m.requests.WithLabelValues("ok").Inc()
	for _, g := range o.batch.Groups {
		c.m.entries.Add(float64(len(g.Entries)))
	}
	return nil
}

func (c *Client) do(ctx context.Context, o *owner) error {
	o.self = selfUnknown
	if c.cfg.Self != nil && o.node.ID == c.cfg.SelfID {
		return c.cfg.Self(o.body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	if v := resp.Header.Get(shardapi.MembersHeader); v != "" && c.selfName != "" {
		o.self = selfLeftOut
		for m := range strings.SplitSeq(v, ",") {
			if m == c.selfName {
				o.self = selfIn
				break
			}
		}
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return err
}

// Membership lists the children of a ZooKeeper folder with their data: Watch
// calls fn with every change until ctx ends, and returns early only when it
// gives up for good. A ZooKeeper session of internal/zkgroup implements it.
type Membership interface {
	Watch(ctx context.Context, dir string, fn func(members map[string][]byte)) error
}

// Follow keeps the ring in step with the aggregators registered under
// hotset.AggregatorsDir(Config.Root) until ctx ends, then returns nil. It
// returns early only when m.Watch gives up (the session was closed).
func (c *Client) Follow(ctx context.Context, m Membership) error {
	err := m.Watch(ctx, hotset.AggregatorsDir(c.cfg.Root), c.SetMembers)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("shardclient: follow members: %w", err)
}

// SetMembers replaces the ring with the members listed: node name (the
// member id, hotset.Escape'd) -> hotset.Member JSON, the shape of a
// Membership.Watch callback. A member that does not decode, has no address or
// whose id does not match its node name is skipped and logged.
func (c *Client) SetMembers(members map[string][]byte) {
	nodes := make([]router.Node, 0, len(members))
	for name, data := range members {
		m, err := hotset.DecodeMember(data)
		switch {
		case err != nil:
			c.log.Warn("skipping aggregator member", "node", name, "err", err)
			continue
		case m.Addr == "" || (m.ID != name && hotset.Escape(m.ID) != name):
			c.log.Warn("skipping aggregator member", "node", name, "member", m)
			continue
		}
		nodes = append(nodes, router.Node{ID: m.ID, Addr: m.Addr})
	}
	if err := c.table.Update(nodes); err != nil {
		c.log.Error("aggregator ring not updated", "err", err)
		return
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = hotset.Escape(n.ID)
	}
	slices.Sort(names)
	v := strings.Join(names, ",")
	c.members.Store(&v)
	c.m.members.Set(float64(len(nodes)))
	c.log.Info("aggregator members", "count", len(nodes))
}

// Announce wraps a shard's handler (aggregator.Handler) so that its answers
// carry shardapi.MembersHeader: the members this Client routes to, once it has seen
// any. Every process that runs a shard and follows the members should
// serve its shard so: the senders whose own shard it has left out then
// route as it does (see Send).
func (c *Client) Announce(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := c.members.Load(); v != nil && *v != "" {
			w.Header().Set(shardapi.MembersHeader, *v)
		}
		h.ServeHTTP(w, r)
	})
}

// Members returns the aggregators the ring currently routes to, by ID.
func (c *Client) Members() []router.Node { return c.table.Ring().Nodes() }

type metrics struct {
	requests *prometheus.CounterVec
	entries  prometheus.Counter
	seconds  prometheus.Histogram
	members  prometheus.Gauge
	rerouted prometheus.Counter
	selfOut  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	f := promauto.With(reg)
	const ns, sub = "hotspot", "shardclient"
	return metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "requests_total", Help: "Partial batches sent to aggregators, by result (ok, error, no_members)."},
			[]string{"result"}),
		entries: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "entries_total", Help: "(app, key, count) entries accepted by aggregators."}),
		seconds: f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "request_seconds", Help: "Latency of one partial batch POST.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}}),
		members: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "members", Help: "Aggregators in the ring."}),
		rerouted: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reroutes_total", Help: "Rounds of counts rerouted to the next ring node after an aggregator failed."}),
		selfOut: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "self_left_out", Help: "1 while the other shards' answers leave this process's own shard out of their ring, and its keys' counts are routed as they route them."}),
	}
}
