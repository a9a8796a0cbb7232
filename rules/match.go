package rules

import (
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Effective is a rule with every field resolved: what a Set gives for a key.
type Effective struct {
	Index     int // position in the app's list; -1 for the default rule
	Mode      Mode
	Measure   Measure
	Ops       Ops
	Threshold float64 // per second
	Window    time.Duration
	Hold      time.Duration
	Low       float64 // fraction of Threshold
	K         int     // TopK only
}

// Kind is why a key this rule makes hot is hot: write when the rule counts
// writes only, else bytes or count by its measure.
func (e *Effective) Kind() Kind {
	switch {
	case e.Ops == Write:
		return KindWrite
	case e.Measure == Bytes:
		return KindBytes
	}
	return KindCount
}

// Default is the default rule from hotspotd's settings: threshold mode,
// counting reads.
func Default(threshold float64, window, hold time.Duration, low float64) Effective {
	return Effective{Index: -1, Mode: Threshold, Measure: Count, Ops: Read,
		Threshold: threshold, Window: window, Hold: hold, Low: low}
}

// resolve returns r with def's values for its absent fields.
func (r *Rule) resolve(i int, def Effective) Effective {
	e := def
	e.Index = i
	e.Mode = cmpOr(r.Mode, def.Mode)
	e.Measure = cmpOr(r.Measure, def.Measure)
	e.Ops = cmpOr(r.Ops, def.Ops)
	e.Threshold = cmpOr(r.Threshold, def.Threshold)
	e.Window = cmpOr(r.Window, def.Window)
	e.Hold = cmpOr(r.Hold, def.Hold)
	e.Low = cmpOr(r.Low, def.Low)
	e.K = r.K
	return e
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Set is an app's compiled rules: safe for concurrent use, never changed.
type Set struct {
	def   Effective
	rules []compiled
	exact map[string]int // exact pattern -> index of the first exact rule with it
}

type compiled struct {
	eff     Effective
	match   Match
	pattern string
	glob    []globPart
}

// Compile checks l and resolves it against def. A nil or empty list gives
// a Set in which every key follows def.
func Compile(l *List, def Effective) (*Set, error) {
	def.Index = -1
	s := &Set{def: def, exact: make(map[string]int)}
	if l == nil {
		return s, nil
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	for i := range l.Rules {
		r := &l.Rules[i]
		c := compiled{eff: r.resolve(i, def), match: r.Match, pattern: r.Pattern}
		if r.Match == Glob {
			c.glob, _ = parseGlob(r.Pattern) // checked
		}
		if r.Match == Exact {
			if _, ok := s.exact[r.Pattern]; !ok {
				s.exact[r.Pattern] = i
			}
		}
		s.rules = append(s.rules, c)
	}
	return s, nil
}

// Default returns the rule of keys no rule matches.
func (s *Set) Default() Effective { return s.def }

// Len returns the number of rules.
func (s *Set) Len() int { return len(s.rules) }

// Rule returns rule i resolved; i -1 is the default rule.
func (s *Set) Rule(i int) Effective {
	if i < 0 || i >= len(s.rules) {
		return s.def
	}
	return s.rules[i].eff
}

// Match returns the rule of key: the first that matches it, or the default.
func (s *Set) Match(key string) Effective {
	end := len(s.rules)
	if i, ok := s.exact[key]; ok {
		end = i // no rule after the first exact match can win
	}
	for i := range end {
		if s.rules[i].matches(key) {
			return s.rules[i].eff
		}
	}
	if end < len(s.rules) {
		return s.rules[end].eff
	}
	return s.def
}

func (c *compiled) matches(key string) bool {
	switch c.match {
	case Exact:
		return key == c.pattern
	case Prefix:
		return strings.HasPrefix(key, c.pattern)
	case Suffix:
		return strings.HasSuffix(key, c.pattern)
	}
	return matchGlob(c.glob, key)
}

// A glob is a sequence of literals, '*' (any run of bytes) and '?' (any one
// character: a UTF-8 sequence, or one byte that is not part of one).
type globPart struct {
	lit       string // when neither star nor one
	star, one bool
}

var errEscape = errors.New(`it ends in an unfinished escape '\'`)

func parseGlob(p string) ([]globPart, error) {
	var parts []globPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, globPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 == len(p) {
				return nil, errEscape
			}
			i++
			lit.WriteByte(p[i])
		case '*':
			flush()
			if n := len(parts); n == 0 || !parts[n-1].star {
				parts = append(parts, globPart{star: true})
			}
		case '?':
			flush()
			parts = append(parts, globPart{one: true})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// matchGlob matches key against parts: each star first takes as little as
// it can and, when what follows fails, one more byte (the classic
// backtracking to the last star only, linear in practice).
func matchGlob(parts []globPart, key string) bool {
	pi, ki := 0, 0
	starP, starK := -1, 0
	for {
		if pi < len(parts) {
			switch p := parts[pi]; {
			case p.star:
				starP, starK = pi, ki
				pi++
				continue
			case p.one:
				if ki < len(key) {
					_, n := utf8.DecodeRuneInString(key[ki:])
					ki += n
					pi++
					continue
				}
			default:
				if strings.HasPrefix(key[ki:], p.lit) {
					ki += len(p.lit)
					pi++
					continue
				}
			}
		} else if ki == len(key) {
			return true
		}
		if starP < 0 || starK >= len(key) {
			return false
		}
		starK++
		pi, ki = starP+1, starK
	}
}
