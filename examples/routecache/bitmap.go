package routecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// Shards is a set of database shard numbers, as a bitmap: bit i of byte i/8
// is shard i.
type Shards struct{ b []byte }

// MaxShards bounds a bitmap (v2 values carry their length).
const MaxShards = 1 << 16

// ShardsOf returns the set of the given shards.
func ShardsOf(shards ...int) Shards {
	var s Shards
	for _, n := range shards {
		s = s.With(n)
	}
	return s
}

// With returns s plus shard n (s itself if n is in it already); n must be in
// [0, MaxShards).
func (s Shards) With(n int) Shards {
	if n < 0 || n >= MaxShards {
		panic(fmt.Sprintf("routecache: shard %d out of range", n))
	}
	if s.Has(n) {
		return s
	}
	b := slices.Clone(s.b)
	if need := n/8 + 1; len(b) < need {
		b = append(b, make([]byte, need-len(b))...)
	}
	b[n/8] |= 1 << (n % 8)
	return Shards{b}
}

// Or returns the union of s and t.
func (s Shards) Or(t Shards) Shards {
	b := slices.Clone(s.b)
	if len(t.b) > len(b) {
		b = append(b, make([]byte, len(t.b)-len(b))...)
	}
	for i, x := range t.b {
		b[i] |= x
	}
	return Shards{b}
}

// Has reports whether shard n is in s.
func (s Shards) Has(n int) bool {
	return n >= 0 && n/8 < len(s.b) && s.b[n/8]&(1<<(n%8)) != 0
}

// List returns the shards in s, ascending.
func (s Shards) List() []int {
	var out []int
	for i, x := range s.b {
		for x != 0 {
			j := bits.TrailingZeros8(x)
			out = append(out, i*8+j)
			x &^= 1 << j
		}
	}
	return out
}

// Equal reports whether s and t hold the same shards.
func (s Shards) Equal(t Shards) bool { return slices.Equal(s.List(), t.List()) }

func (s Shards) String() string { return fmt.Sprint(s.List()) }

// Value versions. v1 is what the first deployment wrote: 16 shards, two
// bytes, big-endian (bit 0 is shard 0). v2 is the bitmap's length in shards
// as a uvarint, then the bitmap bytes.
const (
	v1 = 1
	v2 = 2
)

var errBadValue = errors.New("routecache: bad route value")

// Encode returns s as a v2 value.
func Encode(s Shards) []byte {
	n := len(s.b)
	for n > 0 && s.b[n-1] == 0 {
		n-- // trailing empty bytes are not written
	}
	out := binary.AppendUvarint([]byte{v2}, uint64(n*8))
	return append(out, s.b[:n]...)
}

// EncodeV1 returns s as a v1 value; s must only hold shards below 16.
// Only tests and the example's old data use it: v1 is read, never written.
func EncodeV1(s Shards) ([]byte, error) {
	var x uint16
	for _, n := range s.List() {
		if n >= 16 {
			return nil, fmt.Errorf("routecache: shard %d does not fit a v1 value", n)
		}
		x |= 1 << n
	}
	return binary.BigEndian.AppendUint16([]byte{v1}, x), nil
}

// Decode reads a v1 or v2 value; a v1 value is upgraded to the same set.
func Decode(b []byte) (Shards, error) {
	if len(b) == 0 {
		return Shards{}, fmt.Errorf("%w: empty", errBadValue)
	}
	switch b[0] {
	case v1:
		if len(b) != 3 {
			return Shards{}, fmt.Errorf("%w: v1 of %d bytes, want 3", errBadValue, len(b))
		}
		x := binary.BigEndian.Uint16(b[1:])
		return Shards{[]byte{byte(x), byte(x >> 8)}}, nil
	case v2:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > MaxShards || n%8 != 0 {
			return Shards{}, fmt.Errorf("%w: v2 length", errBadValue)
		}
		rest := b[1+k:]
		if uint64(len(rest)) != n/8 {
			return Shards{}, fmt.Errorf("%w: v2 of %d shards with %d bytes", errBadValue, n, len(rest))
		}
		return Shards{slices.Clone(rest)}, nil
	}
	return Shards{}, fmt.Errorf("%w: version %d", errBadValue, b[0])
}
