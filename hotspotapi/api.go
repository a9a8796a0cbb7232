package hotspotapi

import "time"

// The routes (docs/api.md). A route with a {key} or {name} takes it
// path-escaped after the path and a slash: PathHotKeys + "/" +
// url.PathEscape(key).
const (
	PathHotKeys   = "/v1/hotkeys"   // GET [?app=]: AppHotKeys or AllHotKeys; GET /{key}?app=: KeyStatus
	PathTop       = "/v1/top"       // GET ?app=&n=: Top
	PathInstances = "/v1/instances" // GET [?app=]: Instances
	PathEvents    = "/v1/events"    // GET [?app=&n=]: Events
	PathHistory   = "/v1/history"   // GET ?app=[&key=&since=&until=&limit=]: History
	PathConfig    = "/v1/config"    // GET: Config
	PathPins      = "/v1/pins"      // GET ?app=: Keys; PUT and DELETE /{key}?app= (admin)
	PathBlocks    = "/v1/blocks"    // GET ?app=: Keys; PUT and DELETE /{key}?app= (admin)
	PathRules     = "/v1/rules"     // GET, PUT (admin) ?app=: a rules.List; DELETE ?app=[&version=] (admin)
	PathWebhooks  = "/v1/webhooks"  // GET ?app=: Webhooks; PUT (WebhookBody) and DELETE /{name}?app= (all admin)
	PathMetrics   = "/metrics"      // GET: Prometheus text
)

// Limits of the query parameters.
const (
	MaxTopN             = 1000   // n of PathTop and PathEvents, from 1
	DefaultTopN         = 10     // n of PathTop when absent
	DefaultEventsN      = 50     // n of PathEvents when absent
	MaxHistoryLimit     = 10_000 // limit of PathHistory, from 1
	DefaultHistoryLimit = 100    // limit of PathHistory when absent
)

// HotKey is one entry of /v1/hotkeys.
type HotKey struct {
	Key    string  `json:"key"`
	Rate   float64 `json:"rate"`  // its rule's measure per second: accesses, or bytes for kind "bytes"
	Since  string  `json:"since"` // RFC 3339
	Source string  `json:"source"`
	Rule   *int    `json:"rule,omitempty"` // index of the app's rule that made it hot, -1 the default rule; absent for a key only pinned
	Kind   string  `json:"kind"`           // "count", "bytes" or "write" (apps never cache a write key)
	// ServedL1 is the fraction of the key's reads the apps answered from
	// their L1 over the effect window, cluster-wide: l1_hits / (l1_hits +
	// l2_reads + limited); absent when nothing was reported.
	ServedL1 *float64 `json:"served_l1,omitempty"`
}

// AppHotKeys is the answer of /v1/hotkeys?app=APP.
type AppHotKeys struct {
	App     string   `json:"app"`
	HotKeys []HotKey `json:"hotkeys"`
}

// AllHotKeys is the answer of /v1/hotkeys without app: every app that has
// hot keys, by name.
type AllHotKeys struct {
	Apps []AppHotKeys `json:"apps"`
}

// SourceShare is one of a key's busiest sources (an app instance, a host,
// a proxy's client) and the fraction (0 to 1) of the key's rate it sent.
type SourceShare struct {
	Source string  `json:"source"`
	Share  float64 `json:"share"`
}

// EffectRates is what the apps' caches did with a key's (or an
// instance's) reads, per second over the effect window (10 s).
type EffectRates struct {
	L1Hits      float64 `json:"l1_hits"`      // reads answered from the apps' L1
	L2Reads     float64 `json:"l2_reads"`     // reads that reached Redis
	SourceLoads float64 `json:"source_loads"` // loads from the source behind it
	Limited     float64 `json:"limited"`      // reads the per-instance rate limit refused
}

// KeyStatus is the answer of /v1/hotkeys/{key}.
type KeyStatus struct {
	App    string  `json:"app"`
	Key    string  `json:"key"`
	Hot    bool    `json:"hot"`
	Rate   float64 `json:"rate"`             // current rate at the owning aggregator; 0 when untracked
	Since  string  `json:"since,omitempty"`  // RFC 3339, when hot
	Source string  `json:"source,omitempty"` // "detected" or "pinned", when hot
	Rule   *int    `json:"rule,omitempty"`   // as in HotKey, when hot
	Kind   string  `json:"kind,omitempty"`   // as in HotKey, when hot
	// Sources, DistinctSources and Effect are the owning aggregator's, for
	// a key near its threshold or hot (absent otherwise): its busiest
	// sources with their shares of its rate, busiest first; an estimate of
	// how many distinct sources send it; what the apps' caches did with its
	// reads, per second cluster-wide.
	Sources         []SourceShare `json:"sources,omitempty"`
	DistinctSources uint64        `json:"distinct_sources,omitempty"`
	Effect          *EffectRates  `json:"effect,omitempty"`
}

// TopKey is one entry of /v1/top.
type TopKey struct {
	Key  string  `json:"key"`
	Rate float64 `json:"rate"`
	Hot  bool    `json:"hot"`
}

// Top is the answer of /v1/top: the busiest keys, busiest first.
type Top struct {
	App  string   `json:"app"`
	Keys []TopKey `json:"keys"`
}

// Instance is one entry of /v1/instances: what one app instance (an SDK
// Client, or an app of a sidecar proxy) did with the reads of its hot keys
// over the effect window, per second, as it reported them.
type Instance struct {
	App      string `json:"app"`
	Instance string `json:"instance"`
	EffectRates
	// ServedL1 is l1_hits / (l1_hits + l2_reads + limited); absent when
	// the instance reported no reads.
	ServedL1 *float64 `json:"served_l1,omitempty"`
}

// Instances is the answer of /v1/instances.
type Instances struct {
	Instances []Instance `json:"instances"`
}

// Event is one promotion or demotion of the published hot set, as the
// answering process saw it (/v1/events).
type Event struct {
	At   string  `json:"at"` // RFC 3339, when the ZooKeeper change arrived there
	App  string  `json:"app"`
	Key  string  `json:"key"`
	Kind string  `json:"kind"`           // "promoted" or "demoted"
	Rate float64 `json:"rate,omitempty"` // at promotion
}

// Events is the answer of /v1/events: newest first.
type Events struct {
	Events []Event `json:"events"`
}

// HistoryEvent is one stored promotion or demotion (/v1/history).
type HistoryEvent struct {
	At   time.Time `json:"at"` // when the shard decided it
	Key  string    `json:"key"`
	Kind string    `json:"kind"` // "promoted" or "demoted"
	Rate float64   `json:"rate"` // accesses per second over the window at the decision
	Rule int       `json:"rule"` // -1: the default rule
	// Sources are a promotion's busiest sources at the decision, busiest
	// first; absent for demotions and for events stored without them.
	Sources []SourceShare `json:"sources,omitempty"`
}

// History is the answer of /v1/history: events newest first.
type History struct {
	App    string         `json:"app"`
	Events []HistoryEvent `json:"events"`
	// Truncated is set when the query stopped before finding its limit
	// of matches: older matches may exist; narrow the time range.
	Truncated bool `json:"truncated,omitempty"`
}

// HistoryQuery is what a Client asks /v1/history for.
type HistoryQuery struct {
	App   string    // required
	Key   string    // "" means every key
	Since time.Time // zero means no lower bound; inclusive
	Until time.Time // zero means no upper bound; inclusive
	Limit int       // 0 means DefaultHistoryLimit; at most MaxHistoryLimit
}

// Config is the answer of /v1/config.
type Config struct {
	Threshold float64 `json:"threshold"` // the hot threshold, accesses/s
	// Topic is the access topic the answering process's detector consumes
	// (with an input file, its topics, comma-separated); "" when it runs
	// no detector.
	Topic string `json:"topic,omitempty"`
}

// List names an operator list: Pins or Blocks.
type List string

// The operator lists.
const (
	Pins   List = "pins"   // keys held hot whatever their rate
	Blocks List = "blocks" // keys never hot
)

// Keys is the answer of GET /v1/pins and /v1/blocks.
type Keys struct {
	App  string   `json:"app"`
	Keys []string `json:"keys"`
}

// Webhook is a subscription as GET /v1/webhooks lists it: the secret never
// leaves the cluster.
type Webhook struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Signed bool   `json:"signed"` // a secret is set
}

// Webhooks is the answer of GET /v1/webhooks.
type Webhooks struct {
	App      string    `json:"app"`
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookBody is the body of PUT /v1/webhooks/{name}.
type WebhookBody struct {
	URL    string `json:"url"`
	Secret string `json:"secret,omitempty"` // signs each delivery with HMAC-SHA256; "" for none
}
