package aggregator

import (
	"math"
	"unsafe"
)

// The table is bounded in bytes as well as in keys (Config.MaxBytes): a key
// under a 60 s rule holds a ring of 612 buckets, twelve times what one under
// a 1 s rule holds, so a bound in keys alone does not bound memory once long
// windows are in use. What a key costs is accounted as the Go heap lays it
// out, and TestKeyBytesMatchesHeap holds the account within 5 % of the heap
// a tracked key takes; a key near its threshold also keeps sources and
// effect, bounded apart by MaxNearKeys (near.go).

// indexBytes is what the table's indexes spend per tracked key: its slot in
// its app's keys map (a 16-byte string header and an 8-byte pointer, a
// control byte, at 7/16 to 7/8 load) and its slots in t.entries and
// t.fresh (8 bytes each, up to twice that with a slice's spare capacity).
// Measured: 63 bytes a key, over 1 000 to 50 000 keys.
const indexBytes = 64

// entryBytes is the heap an entry struct takes: its size class.
var entryBytes = allocBytes(int64(unsafe.Sizeof(entry{})))

// keyBytes is what a tracked key costs: its entry, its window's ring of
// ring buckets, the copy of its key of keyLen bytes and its index slots.
func keyBytes(keyLen, ring int) int64 {
	return entryBytes + allocBytes(int64(ring)*8) + allocBytes(int64(keyLen)) + indexBytes
}

// bytesOf is what e costs (keyBytes).
func bytesOf(e *entry) int64 { return keyBytes(len(e.key), len(e.win.b)) }

// sizeClasses are the Go allocator's size classes up to 32 KiB (Go 1.26's
// internal/runtime/gc/sizeclasses.go): a small object takes the smallest
// class that holds it.
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408,
	1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192,
	9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264,
	28672, 32768}

// allocBytes is the heap an allocation of n bytes without pointers takes:
// its size class, or whole 8 KiB pages beyond 32 KiB. A string of up to 16
// bytes may share a 16-byte block with others; it is counted as a block.
func allocBytes(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > sizeClasses[len(sizeClasses)-1] {
		const page = 8 << 10
		return (n + page - 1) / page * page
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if sizeClasses[mid] < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return sizeClasses[lo]
}

// roomFor makes room for a newcomer at heat (see makeRoom) that costs cost
// bytes: while the table holds MaxKeys keys, or cost more bytes would take
// it past MaxBytes, it evicts the coldest of a few sampled keys, as the key
// bound alone did, and reports false, refusing the newcomer, as soon as no
// sampled key is colder than it. A newcomer with a longer window than the
// keys it displaces may take several evictions. The caller holds t.mu.
func (t *table) roomFor(b int64, heat float64, cost int64) bool {
	for {
		reason := "cap"
		switch {
		case len(t.entries) >= t.p.maxKeys:
		case t.bytes+cost > t.p.maxBytes:
			reason = "cap_bytes"
		default:
			return true
		}
		if len(t.entries) == 0 || !t.makeRoom(b, heat, reason) {
			return false
		}
	}
}

// trimBytes evicts the coldest of sampled keys that are not hot until the
// table is within MaxBytes again, after a rule change lengthened windows.
// It stops early when a sample finds only hot keys, which are never
// evicted. The caller holds t.mu.
func (t *table) trimBytes(b int64) {
	for t.bytes > t.p.maxBytes && len(t.entries) > 0 {
		if !t.makeRoom(b, math.Inf(1), "cap_bytes") {
			return
		}
	}
}

// grew accounts d more bytes of tracked keys (less when negative).
func (t *table) grew(d int64) {
	t.bytes += d
	t.m.trackedBytes.Set(float64(t.bytes))
}
