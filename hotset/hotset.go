package hotset

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
)

// Version is the encoding version this package writes.
const Version = 1

// Defaults every Hotspot process and app agrees on unless configured
// otherwise. They are defined here, once.
const (
	DefaultRoot  = "/hotspot"         // ZooKeeper root of everything Hotspot keeps
	DefaultTopic = "hotspot.access"   // Kafka topic of the access events
	DefaultGroup = "hotspot-detector" // Kafka consumer group of the detectors
)

// MaxBytes bounds an encoded Shard, well under ZooKeeper's 1 MB jute.maxbuffer.
const MaxBytes = 900 << 10

// ErrTooLarge is returned by Encode when a shard would not fit in MaxBytes.
var ErrTooLarge = errors.New("hotset: shard too large for one znode")

// Key is one hot key as published.
type Key struct {
	Key    string  `json:"k"`
	Rate   float64 `json:"r"`             // accesses per second over the rule's window
	Since  int64   `json:"s"`             // Unix ms when it turned hot
	Source string  `json:"src,omitempty"` // "detected" (default) or "pinned"
	// Rule is the index of the app's rule that made the key hot, -1 for
	// the default rule; nil for pinned keys and nodes of older writers.
	Rule *int `json:"rule,omitempty"`
	// Kind is why it is hot: "count" (also when empty, as older writers
	// leave it), "bytes" or "write". Apps never cache a "write" key.
	Kind string `json:"kind,omitempty"`
}

// Shard is the content of one <root>/hot/<app>/<shard> node.
type Shard struct {
	V       int    `json:"v"`
	App     string `json:"app"`
	Shard   string `json:"shard"`
	Updated int64  `json:"updated"` // Unix ms of the write
	TTL     int64  `json:"ttl"`     // ms the keys stay valid after Updated without a renewal
	Keys    []Key  `json:"keys"`    // sorted by Rate, descending
}

// Expired reports whether the shard's keys are past their TTL at now.
func (s *Shard) Expired(now time.Time) bool {
	return now.UnixMilli() > s.Updated+s.TTL
}

// Member is the content of a membership node, of either role.
type Member struct {
	V    int    `json:"v"`
	ID   string `json:"id"`
	Addr string `json:"addr"` // host:port of its HTTP server
}

// Encode returns the JSON form of s, with V set to Version.
func Encode(s *Shard) ([]byte, error) {
	c := *s
	c.V = Version
	if c.Keys == nil {
		c.Keys = []Key{}
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("hotset: encode: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(b))
	}
	return b, nil
}

// Decode parses a Shard node, rejecting versions it does not know and
// content that breaks the bounds in validate.go (wrapping ErrInvalid).
func Decode(b []byte) (*Shard, error) {
	if len(b) > MaxBytes {
		return nil, invalid("%d bytes, more than %d", len(b), MaxBytes)
	}
	var s Shard
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("hotset: decode shard: %w", err)
	}
	if s.V != Version {
		return nil, fmt.Errorf("hotset: unknown shard version %d", s.V)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// EncodeMember returns the JSON form of m, with V set to Version.
func EncodeMember(m Member) []byte {
	m.V = Version
	b, _ := json.Marshal(m) // a struct of strings always marshals
	return b
}

// DecodeMember parses a membership node and checks that it names an id and
// a host:port address (see validate.go), so that no reader dials anything else.
func DecodeMember(b []byte) (Member, error) {
	var m Member
	if len(b) > 4096 {
		return m, invalid("member node of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("hotset: decode member: %w", err)
	}
	if m.V != Version {
		return m, fmt.Errorf("hotset: unknown member version %d", m.V)
	}
	if err := m.validate(); err != nil {
		return Member{}, err
	}
	return m, nil
}

// Operator nodes sit in an app's folder beside the shards' nodes. Their
// names can never be an escaped shard id (Escape never leaves a "%" that
// does not start a valid escape), so readers and the garbage collector tell
// them apart by name. Both hold a Shard whose TTL is PinTTL.
const (
	PinsNode   = "%pins"   // keys an operator pinned hot (Source "pinned")
	BlocksNode = "%blocks" // keys an operator blocked from ever being hot
)

// PinTTL is the TTL of the operator nodes: they hold until changed.
const PinTTL = int64(100 * 365 * 24 * time.Hour / time.Millisecond)

// PinsPath is the node of app's pinned keys.
func PinsPath(root, app string) string { return path.Join(AppDir(root, app), PinsNode) }

// BlocksPath is the node of app's blocked keys.
func BlocksPath(root, app string) string { return path.Join(AppDir(root, app), BlocksNode) }

// RulesDir is the folder of the apps' rule lists.
func RulesDir(root string) string { return path.Join(root, "rules") }

// RulesPath is the node of app's rule list (package rules encodes it).
func RulesPath(root, app string) string { return path.Join(RulesDir(root), Escape(app)) }

// AggregatorsDir is the folder of aggregator membership nodes.
func AggregatorsDir(root string) string { return path.Join(root, "members", "aggregators") }

// DetectorsDir is the folder of detector membership nodes.
func DetectorsDir(root string) string { return path.Join(root, "members", "detectors") }

// HotDir is the folder holding one node per app.
func HotDir(root string) string { return path.Join(root, "hot") }

// AppDir is the folder of an app's shard nodes.
func AppDir(root, app string) string { return path.Join(root, "hot", Escape(app)) }

// ShardPath is the node of one shard's hot keys for app.
func ShardPath(root, app, shard string) string { return path.Join(AppDir(root, app), Escape(shard)) }

// Escape makes any string a single znode name: it path-escapes it and
// escapes the names "." and "..", which ZooKeeper rejects.
func Escape(name string) string {
	e := url.PathEscape(name)
	switch e {
	case "", ".", "..":
		return "%" + strings.Repeat("2E", len(e)) + "_" // never produced by PathEscape, so reversible
	}
	return e
}

// Unescape reverses Escape.
func Unescape(name string) (string, error) {
	switch name {
	case "%_":
		return "", nil
	case "%2E_":
		return ".", nil
	case "%2E2E_":
		return "..", nil
	}
	s, err := url.PathUnescape(name)
	if err != nil {
		return "", fmt.Errorf("hotset: bad node name %q: %w", name, err)
	}
	return s, nil
}
