package ingest

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// matcher tests a where pattern. The common patterns are literal ('^2',
// '^GET$', 'api'); those are tested without the regexp machine, which
// costs about 100 ns a call even for '^2'.
type matcher struct {
	kind matchKind
	lit  []byte
	re   *regexp.Regexp
}

type matchKind uint8

const (
	matchRegexp   matchKind = iota
	matchPrefix             // ^lit
	matchEqual              // ^lit$
	matchContains           // lit
)

func newMatcher(re *regexp.Regexp) matcher {
	m := matcher{re: re}
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return m
	}
	t = t.Simplify()
	lit := func(t *syntax.Regexp) (string, bool) {
		if t.Op != syntax.OpLiteral || t.Flags&syntax.FoldCase != 0 {
			return "", false
		}
		s := string(t.Rune)
		// U+FFFD in a pattern also matches a byte that is not UTF-8.
		return s, !strings.ContainsRune(s, utf8.RuneError)
	}
	switch {
	case t.Op == syntax.OpLiteral:
		if s, ok := lit(t); ok {
			m.kind, m.lit = matchContains, []byte(s)
		}
	case t.Op == syntax.OpConcat && len(t.Sub) == 2 && t.Sub[0].Op == syntax.OpBeginText:
		if s, ok := lit(t.Sub[1]); ok {
			m.kind, m.lit = matchPrefix, []byte(s)
		}
	case t.Op == syntax.OpConcat && len(t.Sub) == 3 && t.Sub[0].Op == syntax.OpBeginText && t.Sub[2].Op == syntax.OpEndText:
		if s, ok := lit(t.Sub[1]); ok {
			m.kind, m.lit = matchEqual, []byte(s)
		}
	}
	return m
}

func (m *matcher) match(b []byte) bool {
	switch m.kind {
	case matchPrefix:
		return bytes.HasPrefix(b, m.lit)
	case matchEqual:
		return bytes.Equal(b, m.lit)
	case matchContains:
		return bytes.Contains(b, m.lit)
	}
	return m.re.Match(b)
}
