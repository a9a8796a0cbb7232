package wire

import "math"

// readUvarint reads the unsigned varint (encoding/binary's format) at b[i].
// It returns the value and the index after it, or a fail whose offset is i.
func readUvarint(b []byte, i int) (uint64, int, fail) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, fail{}
	}
	var v uint64
	var s uint
	for k := 0; k < 10; k++ {
		if i+k >= len(b) {
			return 0, i, fail{ReasonTruncated, i, "varint runs past the end"}
		}
		c := b[i+k]
		if c < 0x80 {
			if k == 9 && c > 1 {
				break
			}
			return v | uint64(c)<<s, i + k + 1, fail{}
		}
		v |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, i, fail{ReasonBadVarint, i, "varint overflows 64 bits"}
}

// trustedUvarint reads a varint that a validation pass has already accepted.
func trustedUvarint(b []byte, i int) (uint64, int) {
	c := b[i]
	if c < 0x80 {
		return uint64(c), i + 1
	}
	v := uint64(c & 0x7f)
	for s := uint(7); ; s += 7 {
		i++
		c = b[i]
		if c < 0x80 {
			return v | uint64(c)<<s, i + 1
		}
		v |= uint64(c&0x7f) << s
	}
}

// readLen reads a length prefix at b[i] and checks that that many bytes
// follow. It returns the length and the index of the first byte it covers.
func readLen(b []byte, i int, what string) (int, int, fail) {
	v, j, f := readUvarint(b, i)
	if f.r != 0 {
		return 0, i, f
	}
	if v > uint64(len(b)-j) {
		return 0, i, fail{ReasonTruncated, i, what + " length runs past the end"}
	}
	return int(v), j, fail{}
}

// readTime reads a Unix-millisecond time written as a uvarint.
func readTime(b []byte, i int) (int64, int, fail) {
	v, j, f := readUvarint(b, i)
	if f.r != 0 {
		return 0, i, f
	}
	if v > math.MaxInt64 {
		return 0, i, fail{ReasonBadValue, i, "time out of range"}
	}
	return int64(v), j, fail{}
}

// readCount reads a number of items, each at least minSize bytes long, and
// checks that the remaining bytes could hold them, so that a lying header
// cannot make a caller loop or allocate beyond the input's size.
func readCount(b []byte, i, minSize int, what string) (int, int, fail) {
	v, j, f := readUvarint(b, i)
	if f.r != 0 {
		return 0, i, f
	}
	if v > uint64((len(b)-j)/minSize) {
		return 0, i, fail{ReasonTruncated, i, what + " count exceeds what the remaining bytes can hold"}
	}
	return int(v), j, fail{}
}
