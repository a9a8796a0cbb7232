package rules

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Match is how a rule's pattern is compared with a key.
type Match string

// The matches.
const (
	Exact  Match = "exact"  // the key equals the pattern
	Prefix Match = "prefix" // the key starts with the pattern
	Suffix Match = "suffix" // the key ends with the pattern
	Glob   Match = "glob"   // '*' matches any run of bytes, '?' any one character, '\' escapes the next
)

// Mode is how a rule decides that a key is hot.
type Mode string

// The modes.
const (
	Threshold Mode = "threshold" // hot at Threshold per second, with the low mark and hold as hysteresis
	TopK      Mode = "topk"      // the K busiest matching keys of the app are hot, whatever their rate
	Never     Mode = "never"     // never hot (still counted and listed by top)
)

// Measure is what a rule's rate counts.
type Measure string

// The measures.
const (
	Count Measure = "count" // accesses
	Bytes Measure = "bytes" // bytes of the values accessed
)

// Ops is which accesses a rule counts.
type Ops string

// The ops.
const (
	Read  Ops = "read"
	Write Ops = "write"
	Any   Ops = "any"
)

// Kind is why a published key is hot: "count", "bytes" or "write". Apps
// cache count and bytes keys; a write key must reach its source.
type Kind string

// The kinds.
const (
	KindCount Kind = "count"
	KindBytes Kind = "bytes"
	KindWrite Kind = "write"
)

// Limits of a rule list.
const (
	MaxRules      = 1000 // rules per app
	MaxPatternLen = 1024 // bytes, as a key
	MaxK          = 1000
	MinWindow     = 100 * time.Millisecond
	MaxWindow     = 60 * time.Second
	Bucket        = 100 * time.Millisecond // windows are whole buckets
	MaxHold       = time.Hour
)

// Rule is one rule as an operator writes it. Match and Pattern are
// required; every other zero field is absent and takes the default rule's
// value.
type Rule struct {
	Match     Match
	Pattern   string
	Mode      Mode
	Measure   Measure
	Ops       Ops
	Threshold float64       // per second: accesses, or bytes with Measure Bytes
	Window    time.Duration // a multiple of Bucket, MinWindow..MaxWindow
	Hold      time.Duration // time below the low mark before a hot key turns cold
	Low       float64       // the low mark, a fraction of Threshold in (0, 1]
	K         int           // Mode TopK only: how many keys, 1..MaxK
}

// List is an app's ordered rules. Version is the stored list's version
// (0: none stored); a write must name the version it replaces.
type List struct {
	App     string
	Version int64
	Rules   []Rule
}

// Error is a list refused because of one rule. Index is the rule's position
// in the list, or -1 when the list as a whole is wrong.
type Error struct {
	Index  int
	Reason string
}

func (e *Error) Error() string {
	if e.Index < 0 {
		return "rules: " + e.Reason
	}
	return fmt.Sprintf("rules: rule %d: %s", e.Index, e.Reason)
}

// Check reports the first thing wrong with l, as an *Error, or nil.
func (l *List) Check() error {
	if len(l.Rules) > MaxRules {
		return &Error{-1, fmt.Sprintf("%d rules, at most %d", len(l.Rules), MaxRules)}
	}
	for i := range l.Rules {
		if reason := l.Rules[i].check(); reason != "" {
			return &Error{i, reason}
		}
	}
	return nil
}

// check returns why r is wrong, or "".
func (r *Rule) check() string {
	switch r.Match {
	case Exact, Prefix, Suffix, Glob:
	case "":
		return "missing match"
	default:
		return fmt.Sprintf("unknown match %q (exact, prefix, suffix or glob)", r.Match)
	}
	switch {
	case r.Pattern == "":
		return "empty pattern"
	case len(r.Pattern) > MaxPatternLen:
		return fmt.Sprintf("pattern of %d bytes, at most %d", len(r.Pattern), MaxPatternLen)
	case !utf8.ValidString(r.Pattern):
		return "pattern is not valid UTF-8"
	}
	if r.Match == Glob {
		if _, err := parseGlob(r.Pattern); err != nil {
			return "bad pattern: " + err.Error()
		}
	}
	switch r.Mode {
	case "", Threshold, Never:
		if r.K != 0 {
			return "k is for mode topk only"
		}
	case TopK:
		if r.K < 1 || r.K > MaxK {
			return fmt.Sprintf("k %d out of range 1..%d", r.K, MaxK)
		}
	default:
		return fmt.Sprintf("unknown mode %q (threshold, topk or never)", r.Mode)
	}
	switch r.Measure {
	case "", Count, Bytes:
	default:
		return fmt.Sprintf("unknown measure %q (count or bytes)", r.Measure)
	}
	switch r.Ops {
	case "", Read, Write, Any:
	default:
		return fmt.Sprintf("unknown ops %q (read, write or any)", r.Ops)
	}
	switch t := r.Threshold; {
	case math.IsNaN(t) || math.IsInf(t, 0):
		return "threshold is not a finite number"
	case t < 0:
		return fmt.Sprintf("threshold %g is not above 0", t)
	}
	if r.Window != 0 {
		if reason := checkWindow(r.Window); reason != "" {
			return reason
		}
	}
	if r.Hold < 0 || r.Hold > MaxHold {
		return fmt.Sprintf("hold %v out of range 0..%v", r.Hold, MaxHold)
	}
	switch l := r.Low; {
	case math.IsNaN(l) || math.IsInf(l, 0):
		return "low is not a finite number"
	case l < 0 || l > 1:
		return fmt.Sprintf("low %g out of range (0, 1]", l)
	}
	return ""
}

func checkWindow(w time.Duration) string {
	switch {
	case w%Bucket != 0:
		return fmt.Sprintf("window %v is not a multiple of %v", w, Bucket)
	case w < MinWindow || w > MaxWindow:
		return fmt.Sprintf("window %v out of range %v..%v", w, MinWindow, MaxWindow)
	}
	return ""
}
