package aggregator

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config tunes an Aggregator. A zero field means its default.
type Config struct {
	ID   string // shard id, stable across restarts and unique among aggregators; required
	Addr string // host:port of this process's HTTP server, registered for detectors; required

	Threshold float64       // accesses per second that make a key hot; 0 means 1000
	LowMark   float64       // rate below which a hot key's hold starts; 0 means 0.8*Threshold
	Hold      time.Duration // how long the rate must stay below LowMark to demote; 0 means 2s
	// Stall is how long no partials batch may arrive from any detector
	// before the shard takes the silence for a pause of the detectors (a
	// consumer-group rebalance stops them all) rather than for cold keys,
	// and stops demoting; 0 means 500ms. Detectors send a batch, empty or
	// not, every flush tick. MaxStall bounds such a pause: after it, the
	// silence is believed and keys demote as usual; 0 means 30s.
	Stall    time.Duration
	MaxStall time.Duration
	Window   time.Duration // sliding window; 0 means 1s; a multiple of Bucket
	Bucket   time.Duration // window resolution and sweep tick; 0 means 100ms

	TopK    int // busiest keys kept per app for Top; 0 means 100
	MaxKeys int // tracked (app, key) pairs over all apps; 0 means 100_000
	// MaxBytes bounds the heap the tracked keys take over all apps: each
	// its entry, its window's ring (8 bytes a bucket: its rule's window
	// plus Window, in Buckets), its key and its index slots, about 510
	// bytes under a 1 s rule and 5.7 KB under a 60 s one with the default
	// Window. It and MaxKeys both apply: whichever is reached first makes
	// a newcomer evict colder keys or be refused. 0 means 128 MiB, which
	// MaxKeys' default reaches first with rules of up to 10 s.
	MaxBytes int64
	// MaxApps bounds the apps tracked at once; a batch entry for one more
	// is dropped before anything is allocated for it. 0 means 1000.
	MaxApps int
	// MaxHotPerApp bounds the hot keys of one app: a promotion into a full
	// app demotes the coldest hot key, or is refused when that key is
	// hotter. 0 means MaxKeysPerNode.
	MaxHotPerApp int
	// MaxNearKeys bounds the keys for which the shard keeps sources and
	// effect (keys near their threshold, or hot): a hot key may take the
	// place of one that is not; 0 means 10_000.
	MaxNearKeys int

	MaxKeysPerNode  int           // hot keys published per app node, the busiest first; 0 means 10_000
	PublishInterval time.Duration // minimum gap between writes of the hot set; 0 means 100ms
	TTL             time.Duration // validity of a published node at readers; 0 means 10s
	// RateRefresh is how often, at most, a node is rewritten because a hot
	// key's rate moved by more than 5% since the last write; 0 means 500ms.
	RateRefresh  time.Duration
	Renew        time.Duration // rewrite period of a node that holds keys; 0 means TTL/4; < TTL
	GCInterval   time.Duration // how often dead shards' nodes are collected; 0 means TTL
	WriteTimeout time.Duration // bound on one Publisher call; 0 means 2s

	MaxBodyBytes int64 // largest accepted partials body; 0 means 1 MiB

	Recorder Recorder // told every promotion and demotion (history, webhooks); nil: none

	// Peers gives every shard's candidates for the top-K cut of rules in
	// mode topk (hotspotd passes its internal/shardclient Client); nil: this shard cuts
	// over its own keys, right only when it is the only shard.
	Peers Peers
	// TopKInterval is how often each top-K rule is cut; 0 means 500ms.
	TopKInterval time.Duration
	// PeerGrace is how long a shard that does not answer a top-K query
	// counts with its last answer; 0 means 5s.
	PeerGrace time.Duration

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
}

func (c Config) withDefaults() (Config, error) {
	if c.ID == "" {
		return c, errors.New("aggregator: ID is required")
	}
	if c.Addr == "" {
		return c, errors.New("aggregator: Addr is required")
	}
	c.Threshold = cmp.Or(c.Threshold, 1000)
	c.LowMark = cmp.Or(c.LowMark, 0.8*c.Threshold)
	c.Hold = cmp.Or(c.Hold, 2*time.Second)
	c.Stall = cmp.Or(c.Stall, 500*time.Millisecond)
	c.MaxStall = cmp.Or(c.MaxStall, 30*time.Second)
	c.Bucket = cmp.Or(c.Bucket, 100*time.Millisecond)
	c.Window = cmp.Or(c.Window, time.Second)
	c.TopK = cmp.Or(c.TopK, 100)
	c.MaxKeys = cmp.Or(c.MaxKeys, 100_000)
	c.MaxBytes = cmp.Or(c.MaxBytes, 128<<20)
	c.MaxKeysPerNode = cmp.Or(c.MaxKeysPerNode, 10_000)
	c.MaxApps = cmp.Or(c.MaxApps, 1000)
	c.MaxHotPerApp = cmp.Or(c.MaxHotPerApp, c.MaxKeysPerNode)
	c.MaxNearKeys = cmp.Or(c.MaxNearKeys, 10_000)
	c.PublishInterval = cmp.Or(c.PublishInterval, 100*time.Millisecond)
	c.TTL = cmp.Or(c.TTL, 10*time.Second)
	c.RateRefresh = cmp.Or(c.RateRefresh, 500*time.Millisecond)
	c.Renew = cmp.Or(c.Renew, c.TTL/4)
	c.GCInterval = cmp.Or(c.GCInterval, c.TTL)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 2*time.Second)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	c.TopKInterval = cmp.Or(c.TopKInterval, 500*time.Millisecond)
	c.PeerGrace = cmp.Or(c.PeerGrace, 5*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	switch {
	case c.Threshold < 0:
		return c, fmt.Errorf("aggregator: Threshold %v must be > 0", c.Threshold)
	case c.LowMark < 0 || c.LowMark > c.Threshold:
		return c, fmt.Errorf("aggregator: LowMark %v must be in (0, Threshold %v]", c.LowMark, c.Threshold)
	case c.Hold < 0:
		return c, fmt.Errorf("aggregator: Hold %v must be >= 0", c.Hold)
	case c.Stall < 0 || c.MaxStall < c.Stall:
		return c, fmt.Errorf("aggregator: Stall %v must be >= 0 and <= MaxStall %v", c.Stall, c.MaxStall)
	case c.Bucket < time.Millisecond:
		return c, fmt.Errorf("aggregator: Bucket %v must be >= 1ms", c.Bucket)
	case c.Window < c.Bucket || c.Window%c.Bucket != 0:
		return c, fmt.Errorf("aggregator: Window %v must be a positive multiple of Bucket %v", c.Window, c.Bucket)
	case c.Window/c.Bucket > 10_000:
		return c, fmt.Errorf("aggregator: Window %v / Bucket %v exceeds 10000 buckets", c.Window, c.Bucket)
	case c.TopK < 0 || c.MaxKeys < 0 || c.MaxKeysPerNode < 0 || c.MaxApps < 0 || c.MaxHotPerApp < 0 || c.MaxNearKeys < 0:
		return c, errors.New("aggregator: TopK, MaxKeys, MaxKeysPerNode, MaxApps, MaxHotPerApp and MaxNearKeys must be >= 0")
	case c.PublishInterval < 0:
		return c, fmt.Errorf("aggregator: PublishInterval %v must be >= 0", c.PublishInterval)
	case c.RateRefresh < 0:
		return c, fmt.Errorf("aggregator: RateRefresh %v must be >= 0", c.RateRefresh)
	case c.TTL < time.Millisecond:
		return c, fmt.Errorf("aggregator: TTL %v must be >= 1ms", c.TTL)
	case c.Renew <= 0 || c.Renew >= c.TTL:
		return c, fmt.Errorf("aggregator: Renew %v must be in (0, TTL %v)", c.Renew, c.TTL)
	case c.GCInterval < 0 || c.WriteTimeout < 0 || c.MaxBodyBytes < 0 || c.MaxBytes < 0:
		return c, errors.New("aggregator: GCInterval, WriteTimeout, MaxBodyBytes and MaxBytes must be >= 0")
	case c.TopKInterval < 0 || c.PeerGrace < 0:
		return c, errors.New("aggregator: TopKInterval and PeerGrace must be >= 0")
	}
	return c, nil
}
