package ingest

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// The json format reads a handful of dotted paths out of each object. A
// general-purpose path library (gjson) takes a pass over the object per path
// plus one to validate it, about 1.2 µs for six paths of a 260-byte object;
// jscan validates the object and picks every path out of it in one pass,
// allocation-free, guided by a trie of the paths (jnode).

// maxDepth is the deepest nesting of objects and arrays accepted, counting
// the top-level object: encoding/json's limit.
const maxDepth = 10000

// jkind is the JSON type of a value a path points at.
type jkind uint8

const (
	kAbsent jkind = iota // no such path, or null
	kString
	kNumber
	kBool
	kObject
	kArray
)

var kindNames = [...]string{kAbsent: "absent", kString: "string", kNumber: "number", kBool: "boolean", kObject: "object", kArray: "array"}

// jnode is a node of the trie of the paths an input reads: the root stands
// for the top-level object.
type jnode struct {
	slot     int      // the slot of the path that ends here, -1 if none
	children []jchild // members (and array elements) on the way to deeper paths
	sub      []int    // the slots at and below this node
	hasIdx   bool     // some child's name is an array index
}

type jchild struct {
	name string
	idx  int // name as an array index, -1 if it is not one
	node *jnode
}

func newJNode() *jnode { return &jnode{slot: -1} }

// add adds the path segs ending in slot below n.
func (n *jnode) add(segs []string, slot int) {
	n.sub = append(n.sub, slot)
	if len(segs) == 0 {
		n.slot = slot
		return
	}
	for _, c := range n.children {
		if c.name == segs[0] {
			c.node.add(segs[1:], slot)
			return
		}
	}
	c := jchild{name: segs[0], idx: arrayIndex(segs[0]), node: newJNode()}
	n.hasIdx = n.hasIdx || c.idx >= 0
	n.children = append(n.children, c)
	c.node.add(segs[1:], slot)
}

// arrayIndex returns s as an array index (decimal digits, no leading zero),
// or -1.
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 || s[0] == '0' && len(s) > 1 {
		return -1
	}
	n := 0
	for i := range len(s) {
		if !isDigit(s[i]) {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
}

func (n *jnode) member(name []byte) *jnode {
	if len(name) == 0 {
		return nil // no path has an empty member name
	}
	for i := range n.children {
		// Most members are not wanted: reject on length and first byte.
		if c := &n.children[i]; len(c.name) == len(name) && c.name[0] == name[0] && c.name == string(name) {
			return c.node
		}
	}
	return nil
}

func (n *jnode) element(idx int) *jnode {
	for i := range n.children {
		if n.children[i].idx == idx {
			return n.children[i].node
		}
	}
	return nil
}

// jspan is where a path's value is in the scanned line.
type jspan struct {
	start, end int // a string's contents, without the quotes; other values whole
	kind       jkind
	esc        bool // a string with backslash escapes
}

// jscan is a validating JSON scanner that records the spans of the values
// at an input's paths. Its buffers are reused from line to line.
type jscan struct {
	b     []byte
	spans []jspan // by slot
	stack []byte  // closing brackets of the containers skip is inside
	name  []byte  // an escaped member name, unescaped
	err   int     // offset of the syntax error
}

// scan validates the JSON text b and records the paths below root. It
// returns whether b is valid JSON and whether it is an object; on a syntax
// error, s.err is its offset.
func (s *jscan) scan(b []byte, root *jnode) (valid, object bool) {
	s.b = b
	clear(s.spans)
	i := skipWS(b, 0)
	if i >= len(b) {
		s.err = i
		return false, false
	}
	object = b[i] == '{'
	if !object {
		root = nil // only an object has members to read
	}
	i, ok := s.value(i, root, 1)
	if !ok {
		return false, false
	}
	if i = skipWS(b, i); i != len(b) {
		s.err = i
		return false, false
	}
	return true, object
}

// fail records a syntax error at i.
func (s *jscan) fail(i int) (int, bool) {
	s.err = i
	return i, false
}

// value scans the value at b[i] (after any whitespace), the value of the
// path ending at n (nil: a value no path reads), at nesting depth depth if
// it is a container. It returns the index after the value.
func (s *jscan) value(i int, n *jnode, depth int) (int, bool) {
	b := s.b
	if i >= len(b) {
		return s.fail(i)
	}
	start := i
	var ok, esc bool
	var kind jkind
	switch b[i] {
	case '{':
		kind = kObject
		if n != nil && len(n.children) > 0 {
			i, ok = s.object(i, n, depth)
		} else {
			i, ok = s.skip(i, depth)
		}
	case '[':
		kind = kArray
		if n != nil && n.hasIdx {
			i, ok = s.array(i, n, depth)
		} else {
			i, ok = s.skip(i, depth)
		}
	case '"':
		kind = kString
		i, esc, ok = s.str(i)
	case 't':
		kind = kBool
		i, ok = s.lit(i, "true")
	case 'f':
		kind = kBool
		i, ok = s.lit(i, "false")
	case 'n':
		kind = kAbsent // null is absent, as in the wire format
		i, ok = s.lit(i, "null")
	default:
		kind = kNumber
		i, ok = s.number(i)
	}
	if !ok {
		return i, false
	}
	if n != nil && n.slot >= 0 {
		if kind == kString {
			s.spans[n.slot] = jspan{start + 1, i - 1, kind, esc}
		} else {
			s.spans[n.slot] = jspan{start, i, kind, false}
		}
	}
	return i, true
}

// object scans the object at b[i] whose members lead to paths below n.
func (s *jscan) object(i int, n *jnode, depth int) (int, bool) {
	b := s.b
	if depth > maxDepth {
		return s.fail(i)
	}
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return s.fail(i)
		}
		j, esc, ok := s.str(i)
		if !ok {
			return j, false
		}
		name := b[i+1 : j-1]
		if esc {
			s.name = unescape(s.name[:0], name)
			name = s.name
		}
		child := n.member(name)
		if i = skipWS(b, j); i >= len(b) || b[i] != ':' {
			return s.fail(i)
		}
		if child != nil {
			// The member may appear again: the last one wins, as in
			// encoding/json, so forget what an earlier one set.
			for _, sl := range child.sub {
				s.spans[sl] = jspan{}
			}
		}
		if i, ok = s.value(skipWS(b, i+1), child, depth+1); !ok {
			return i, false
		}
		if i = skipWS(b, i); i >= len(b) {
			return s.fail(i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, true
		default:
			return s.fail(i)
		}
	}
}

// array scans the array at b[i] whose elements lead to paths below n.
func (s *jscan) array(i int, n *jnode, depth int) (int, bool) {
	b := s.b
	if depth > maxDepth {
		return s.fail(i)
	}
	if i = skipWS(b, i+1); i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for idx := 0; ; idx++ {
		var ok bool
		if i, ok = s.value(i, n.element(idx), depth+1); !ok {
			return i, false
		}
		if i = skipWS(b, i); i >= len(b) {
			return s.fail(i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, true
		default:
			return s.fail(i)
		}
	}
}

// skip scans the object or array at b[i], at nesting depth depth, that no
// path reads into. It keeps its own stack rather than recursing.
func (s *jscan) skip(i, depth int) (int, bool) {
	b := s.b
	st := s.stack[:0]
	defer func() { s.stack = st[:0] }()
	for {
		// At a value.
		if i >= len(b) {
			return s.fail(i)
		}
		var ok bool
		switch b[i] {
		case '{', '[':
			if depth+len(st) > maxDepth {
				return s.fail(i)
			}
			closer := byte('}')
			if b[i] == '[' {
				closer = ']'
			}
			st = append(st, closer)
			if i = skipWS(b, i+1); i < len(b) && b[i] == closer {
				st = st[:len(st)-1]
				i, ok = i+1, true
				break
			}
			if closer == '}' {
				if i, ok = s.memberName(i); !ok {
					return i, false
				}
			}
			continue
		case '"':
			i, _, ok = s.str(i)
		case 't':
			i, ok = s.lit(i, "true")
		case 'f':
			i, ok = s.lit(i, "false")
		case 'n':
			i, ok = s.lit(i, "null")
		default:
			i, ok = s.number(i)
		}
		if !ok {
			return i, false
		}
		// After a value: close containers until one has a next element.
	after:
		for {
			if len(st) == 0 {
				return i, true
			}
			if i = skipWS(b, i); i >= len(b) {
				return s.fail(i)
			}
			switch c := b[i]; {
			case c == ',':
				i = skipWS(b, i+1)
				if st[len(st)-1] == '}' {
					if i, ok = s.memberName(i); !ok {
						return i, false
					}
				}
				break after
			case c == st[len(st)-1]:
				st = st[:len(st)-1]
				i++
			default:
				return s.fail(i)
			}
		}
	}
}

// memberName scans a member name and its colon at b[i], returning the index
// of the value.
func (s *jscan) memberName(i int) (int, bool) {
	b := s.b
	if i >= len(b) || b[i] != '"' {
		return s.fail(i)
	}
	i, _, ok := s.str(i)
	if !ok {
		return i, false
	}
	if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
		return s.fail(i)
	}
	return skipWS(b, i+1), true
}

// str scans the string at b[i] (a '"'), returning the index after its
// closing quote and whether it holds escapes. Bytes that are not valid
// UTF-8 are a syntax error, as in package wire (encoding/json would replace
// them, merging different keys).
func (s *jscan) str(i int) (int, bool, bool) {
	b := s.b
	esc := false
	for i++; ; {
		if i = wire.ScanJSONSafe(b, i); i >= len(b) {
			j, _ := s.fail(i)
			return j, esc, false
		}
		switch c := b[i]; {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				j, _ := s.fail(i)
				return j, esc, false
			}
			i += size
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				j, _ := s.fail(i)
				return j, esc, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					j, _ := s.fail(i)
					return j, esc, false
				}
				i += 6
			default:
				j, _ := s.fail(i)
				return j, esc, false
			}
		default: // a control character
			j, _ := s.fail(i)
			return j, esc, false
		}
	}
}

func (s *jscan) lit(i int, w string) (int, bool) {
	if !hasPrefixAt(s.b, i, w) {
		return s.fail(i)
	}
	return i + len(w), true
}

// number scans the number at b[i]: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jscan) number(i int) (int, bool) {
	b := s.b
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return s.fail(i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return s.fail(i)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return s.fail(i)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f'
}

func hexVal(c byte) rune {
	if isDigit(c) {
		return rune(c - '0')
	}
	return rune(c|0x20-'a') + 10
}

// unescape appends the JSON string contents s (escapes already validated)
// to dst, decoded as encoding/json decodes them: a \u surrogate that is not
// half of a valid pair becomes U+FFFD.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := u4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = u4(s[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

func u4(s []byte) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}
