package router

import "math/bits"

// The ring's hash is part of Hotspot's wire behaviour: two processes built
// from different versions must still send a key to the same aggregator, so
// both functions below are fixed forever (changing them re-shards every key).
//
//   - Keys are hashed with XXH64, seed 0 (the reference algorithm at
//     https://github.com/Cyan4973/xxHash, checked in tests against
//     github.com/cespare/xxhash/v2).
//   - Virtual node i (0-based) of a node is placed at
//     mix64(XXH64(ID) + (i+1)*0x9E3779B97F4A7C15), the SplitMix64 sequence
//     seeded with the hash of the node's ID, so placement depends only on ID.

const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261

	golden uint64 = 0x9E3779B97F4A7C15
)

// Hash returns the 64-bit XXH64 (seed 0) of s, the position of key s on
// every Ring. It is exported so that other components can log or test a
// key's ring position; it never changes between releases.
func Hash(s string) uint64 {
	n := len(s)
	var h uint64
	if n >= 32 {
		v1, v2, v3, v4 := initV()
		for len(s) >= 32 {
			v1 = round(v1, u64(s[0:8]))
			v2 = round(v2, u64(s[8:16]))
			v3 = round(v3, u64(s[16:24]))
			v4 = round(v4, u64(s[24:32]))
			s = s[32:]
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
			bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = mergeRound(h, v1)
		h = mergeRound(h, v2)
		h = mergeRound(h, v3)
		h = mergeRound(h, v4)
	} else {
		h = prime5
	}
	h += uint64(n)
	for ; len(s) >= 8; s = s[8:] {
		h ^= round(0, u64(s[:8]))
		h = bits.RotateLeft64(h, 27)*prime1 + prime4
	}
	if len(s) >= 4 {
		h ^= uint64(u32(s[:4])) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		s = s[4:]
	}
	for ; len(s) > 0; s = s[1:] {
		h ^= uint64(s[0]) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
	}
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// initV returns XXH64's four lane seeds for seed 0. The sums overflow, which
// Go forbids in constant expressions, hence the variables.
func initV() (v1, v2, v3, v4 uint64) {
	p1, p2 := prime1, prime2
	return p1 + p2, p2, 0, -p1
}

func round(acc, input uint64) uint64 {
	acc += input * prime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * prime1
}

func mergeRound(acc, val uint64) uint64 {
	acc ^= round(0, val)
	return acc*prime1 + prime4
}

// u64 and u32 read little-endian words; the compiler merges the byte loads.
func u64(b string) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func u32(b string) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// mix64 is the SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijection
// that spreads every input bit over the whole output.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// point returns the ring position of virtual node i of the node whose ID
// hashes to base.
func point(base uint64, i int) uint64 {
	return mix64(base + uint64(i+1)*golden)
}
