package ingest

import (
	"errors"
	"strings"
)

// A key template is literal text with {name} placeholders; "{{" and "}}"
// stand for "{" and "}".

// tpart is a piece of a parsed template: literal text, or a placeholder.
type tpart struct {
	lit  string // literal text (ref false)
	name string // the placeholder's name (ref true)
	ref  bool
}

// parseTemplate splits a key template into its parts.
func parseTemplate(s string) ([]tpart, error) {
	var parts []tpart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, tpart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '{':
			j := strings.IndexByte(s[i+1:], '}')
			if j < 0 {
				return nil, errors.New(`"{" without a closing "}" (write "{{" for a literal "{")`)
			}
			name := s[i+1 : i+1+j]
			if name == "" {
				return nil, errors.New(`empty placeholder "{}"`)
			}
			if strings.IndexByte(name, '{') >= 0 {
				return nil, errors.New(`"{" inside a placeholder`)
			}
			flush()
			parts = append(parts, tpart{name: name, ref: true})
			i += j + 1
		case c == '}':
			return nil, errors.New(`"}" without an opening "{" (write "}}" for a literal "}")`)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// refKind says where a placeholder's value comes from.
type refKind uint8

const (
	refLit   refKind = iota // literal text
	refSlot                 // a field of the line: d.vals[idx]
	refGroup                // a group of the extract pattern: submatch idx
)

// ref is a compiled template part, or a field that a where clause, the
// extract or a fields entry reads.
type ref struct {
	kind refKind
	idx  int
	lit  string
	name string // the placeholder's name, for messages
}

// template is a compiled key template.
type template struct {
	src   string
	parts []ref
}
