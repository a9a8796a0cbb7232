package hotset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path"
	"strconv"
)

// A shard's hot set is published twice: whole, in its Shard node (which
// readers of every version read), and split, under PartsShardDir, into
// NumParts part nodes by key hash and a small lease node:
//
//	<root>/parts/<app>/<shard>/lease   {"v":1,"app":..,"shard":..,"updated":..,"ttl":..,"parts":16}
//	<root>/parts/<app>/<shard>/<i>     {"v":1,"keys":[..]}, the keys k with PartOf(k, parts) == i
//
// A writer rewrites only the parts whose keys changed (a promotion, a
// demotion, a reason, a rate that moved by more than RateMove) and, when
// none did, the lease alone (a renewal); it also rewrites the lease whenever its Updated would otherwise
// fall more than TTL/4 behind. A reader that follows the parts therefore
// reads one small node per change instead of the whole set. It treats a
// write of any node of the shard as a renewal: the keys count until TTL has
// passed since it last saw one change. A shard without a valid lease (an
// older writer, or parts being created) is read from its Shard node.
// Writers create every part before the lease, and the lease before they
// rewrite parts alone, so a lease always has its parts.

// RateMove is the relative change of a hot key's rate that is worth a
// write: the aggregator rewrites a shard node when a rate moved by more, and
// a writer of parts rewrites a part only when its keys changed or one of
// their rates moved by more than RateMove since the part was last written.
// A part's rates may therefore lag the shard node's by up to RateMove.
const RateMove = 0.02

// NumParts is how many part nodes a writer splits a shard's keys into.
const NumParts = 16

// maxParts bounds the parts a lease may name.
const maxParts = 1024

// LeaseNode is the name of the lease among a shard's part nodes.
const LeaseNode = "lease"

// Lease is the content of <root>/parts/<app>/<shard>/lease.
type Lease struct {
	V       int    `json:"v"`
	App     string `json:"app"`
	Shard   string `json:"shard"`
	Updated int64  `json:"updated"` // Unix ms of the last write of the lease
	TTL     int64  `json:"ttl"`     // ms the keys stay valid after a write of any node of the shard
	Parts   int    `json:"parts"`   // number of part nodes, named "0".."parts-1"
}

// Part is the content of one part node: some of a shard's keys.
type Part struct {
	V    int   `json:"v"`
	Keys []Key `json:"keys"` // sorted by Rate, descending
}

// PartsDir is the folder holding one folder of part nodes per app.
func PartsDir(root string) string { return path.Join(root, "parts") }

// PartsAppDir is the folder of an app's shards' part folders.
func PartsAppDir(root, app string) string { return path.Join(PartsDir(root), Escape(app)) }

// PartsShardDir is the folder of one shard's lease and part nodes for app.
func PartsShardDir(root, app, shard string) string {
	return path.Join(PartsAppDir(root, app), Escape(shard))
}

// PartName is the node name of part i.
func PartName(i int) string { return strconv.Itoa(i) }

// PartOf returns the part, in [0, n), that holds key: FNV-1a of the key
// modulo n.
func PartOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Split returns s's keys split into n parts by PartOf, each in s's order.
func Split(s *Shard, n int) [][]Key {
	parts := make([][]Key, n)
	for _, k := range s.Keys {
		i := PartOf(k.Key, n)
		parts[i] = append(parts[i], k)
	}
	return parts
}

// EncodeLease returns the JSON form of l, with V set to Version.
func EncodeLease(l Lease) []byte {
	l.V = Version
	b, _ := json.Marshal(l) // strings and numbers always marshal
	return b
}

// DecodeLease parses a lease node and checks its bounds (wrapping ErrInvalid).
func DecodeLease(b []byte) (Lease, error) {
	var l Lease
	if len(b) > 4096 {
		return l, invalid("lease node of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("hotset: decode lease: %w", err)
	}
	if l.V != Version {
		return l, fmt.Errorf("hotset: unknown lease version %d", l.V)
	}
	s := Shard{App: l.App, Shard: l.Shard, Updated: l.Updated, TTL: l.TTL}
	if err := s.validate(); err != nil {
		return Lease{}, err
	}
	if l.Parts < 1 || l.Parts > maxParts {
		return Lease{}, invalid("lease: %d parts out of 1..%d", l.Parts, maxParts)
	}
	return l, nil
}

// EncodePart returns the JSON form of a part holding keys, with V set to
// Version. It fails with ErrTooLarge beyond MaxBytes.
func EncodePart(keys []Key) ([]byte, error) {
	if keys == nil {
		keys = []Key{}
	}
	b, err := json.Marshal(Part{V: Version, Keys: keys})
	if err != nil {
		return nil, fmt.Errorf("hotset: encode part: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: part of %d bytes", ErrTooLarge, len(b))
	}
	return b, nil
}

// DecodePart parses a part node, with the checks of Decode on its keys.
func DecodePart(b []byte) (*Part, error) {
	if len(b) > MaxBytes {
		return nil, invalid("%d bytes, more than %d", len(b), MaxBytes)
	}
	var p Part
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("hotset: decode part: %w", err)
	}
	if p.V != Version {
		return nil, fmt.Errorf("hotset: unknown part version %d", p.V)
	}
	s := Shard{TTL: 1, Keys: p.Keys}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}
