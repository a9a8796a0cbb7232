package hotset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"path"
	"strconv"
)

// A shard's hot set is published twice: whole, in its Shard node (which
// readers of every version read), and split, under PartsShardDir, into
// NumParts part nodes by key hash and a lease node that carries every key's
// current rate in short form:
//
//	<root>/parts/<app>/<shard>/<i>     {"v":1,"gen":7,"keys":[..]}: the keys k with PartOf(k, parts) == i
//	<root>/parts/<app>/<shard>/lease   {"v":1,"app":..,"shard":..,"updated":..,"ttl":..,"parts":16,
//	                                    "gen":[..16],"r":[[..],..16]}
//
// A part changes only with its keys: a promotion, a demotion, a key's since,
// source, rule or kind. Rates move all the time (at every write of the
// aggregator, some key of every part has moved by more than RateMove), so a
// part's rates are those of its last write, and the lease carries the
// current ones: r[i][j] is the rate of key j of part i as written at
// generation gen[i], rounded to three significant digits (RoundRate). A
// reader uses the lease's rates for part i only when gen[i] is the part's
// gen, and the part's own rates otherwise.
//
// A writer rewrites the parts whose keys changed and then the lease, unless
// it wrote parts and no rate moved by more than RateMove since the lease was
// last written and the lease is not TTL/4 old: a promotion costs a reader one
// part, a rate refresh or a renewal the lease. A reader treats a write of
// any node of the shard as a renewal: the keys count until TTL has passed
// since it last saw one change. A shard without a valid lease (an older
// writer, or parts being created) is read from its Shard node. Writers create
// every part before the lease, so a lease always has its parts.

// RateMove is the relative change of a hot key's rate that is worth a
// write: the aggregator rewrites a shard node when a rate moved by more, and
// a writer of parts rewrites the lease then.
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
	// Gen[i] is the generation of part i that Rates[i] is for, and
	// Rates[i][j] the current rate of its key j (RoundRate).
	Gen   []uint64    `json:"gen"`
	Rates [][]float64 `json:"r"`
}

// Part is the content of one part node: some of a shard's keys.
type Part struct {
	V    int    `json:"v"`
	Gen  uint64 `json:"gen"`  // changes with every write of the part
	Keys []Key  `json:"keys"` // with their rates as of this write
}

// RoundRate rounds a rate to three significant digits, the form the lease
// carries it in (well within the 3 % that published rates are held to).
func RoundRate(r float64) float64 {
	if r == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return r
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(r))))
	return math.Round(r*scale) / scale
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

// EncodeLease returns the JSON form of l, with V set to Version. It fails
// for a rate that JSON cannot hold and with ErrTooLarge beyond MaxBytes.
func EncodeLease(l Lease) ([]byte, error) {
	l.V = Version
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("hotset: encode lease: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: lease of %d bytes", ErrTooLarge, len(b))
	}
	return b, nil
}

// DecodeLease parses a lease node and checks its bounds (wrapping ErrInvalid).
func DecodeLease(b []byte) (Lease, error) {
	var l Lease
	if len(b) > MaxBytes {
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
	if len(l.Gen) != l.Parts || len(l.Rates) != l.Parts {
		return Lease{}, invalid("lease: %d gens and %d rate lists for %d parts", len(l.Gen), len(l.Rates), l.Parts)
	}
	n := 0
	for _, rs := range l.Rates {
		n += len(rs)
		for _, r := range rs {
			if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
				return Lease{}, invalid("lease: rate %v", r)
			}
		}
	}
	if n > maxKeys {
		return Lease{}, invalid("lease: %d rates, more than %d", n, maxKeys)
	}
	return l, nil
}

// EncodePart returns the JSON form of part gen holding keys, with V set to
// Version. It fails with ErrTooLarge beyond MaxBytes.
func EncodePart(gen uint64, keys []Key) ([]byte, error) {
	if keys == nil {
		keys = []Key{}
	}
	b, err := json.Marshal(Part{V: Version, Gen: gen, Keys: keys})
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
