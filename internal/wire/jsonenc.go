package wire

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends e as one JSON object, without a trailing newline, to
// dst and returns the extended slice. Fields equal to their default are left
// out (see Event). Strings are escaped as encoding/json escapes them
// (without HTML escaping); invalid UTF-8 becomes U+FFFD, so only valid UTF-8
// keys survive a round trip unchanged.
func AppendJSON(dst []byte, e Event) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendJSONString(dst, e.Key)
	if e.App != "" {
		dst = append(dst, `,"app":`...)
		dst = appendJSONString(dst, e.App)
	}
	if e.Count > 1 {
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendUint(dst, e.Count, 10)
	}
	if e.TS > 0 {
		dst = append(dst, `,"ts":`...)
		dst = strconv.AppendInt(dst, e.TS, 10)
	}
	if e.Bytes > 0 {
		dst = append(dst, `,"bytes":`...)
		dst = strconv.AppendUint(dst, e.Bytes, 10)
	}
	if e.Op == OpWrite {
		dst = append(dst, `,"op":"write"`...)
	}
	if e.Src != "" {
		dst = append(dst, `,"src":`...)
		dst = appendJSONString(dst, e.Src)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendJSONText(dst, s)
	return append(dst, '"')
}

// AppendJSONText appends s escaped as the inside of a JSON string, without
// the quotes, as AppendJSON escapes its strings: '"', '\' and control
// characters escaped, no HTML escaping, invalid UTF-8 as U+FFFD.
func AppendJSONText(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if strSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}
