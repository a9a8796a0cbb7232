package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// NodeVersion is the encoding version of a rule list's ZooKeeper node.
const NodeVersion = 1

// MaxBytes bounds an encoded list, well under ZooKeeper's 1 MB node limit.
const MaxBytes = 900 << 10

// jsonRule is a Rule on the wire. Pointers tell an absent field from a
// zero one, which Check refuses for numbers and durations.
type jsonRule struct {
	Match     Match    `json:"match"`
	Pattern   string   `json:"pattern"`
	Mode      *Mode    `json:"mode,omitempty"`
	Measure   *Measure `json:"measure,omitempty"`
	Ops       *Ops     `json:"ops,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
	Window    *string  `json:"window,omitempty"`
	Hold      *string  `json:"hold,omitempty"`
	Low       *float64 `json:"low,omitempty"`
	K         *int     `json:"k,omitempty"`
}

// jsonList is a List on the wire: the HTTP body, and with V the node.
type jsonList struct {
	V       int               `json:"v,omitempty"`
	App     string            `json:"app"`
	Version int64             `json:"version"`
	Rules   []json.RawMessage `json:"rules"`
}

// Encode returns l as JSON: {"app", "version", "rules": [...]}, each rule
// with only the fields it sets. Durations are strings ("2s").
func Encode(l *List) ([]byte, error) {
	return encode(l, 0, l.Version)
}

// EncodeNode returns l as its ZooKeeper node: Encode's shape with the
// encoding version "v" and without a version, which is the node's own.
func EncodeNode(l *List) ([]byte, error) {
	b, err := encode(l, NodeVersion, 0)
	if err == nil && len(b) > MaxBytes {
		return nil, &Error{-1, fmt.Sprintf("%d bytes encoded, at most %d", len(b), MaxBytes)}
	}
	return b, err
}

func encode(l *List, v int, version int64) ([]byte, error) {
	out := struct {
		V       int        `json:"v,omitempty"`
		App     string     `json:"app"`
		Version int64      `json:"version"`
		Rules   []jsonRule `json:"rules"`
	}{V: v, App: l.App, Version: version, Rules: make([]jsonRule, len(l.Rules))}
	for i, r := range l.Rules {
		out.Rules[i] = toJSON(r)
	}
	return json.Marshal(out)
}

func toJSON(r Rule) jsonRule {
	j := jsonRule{Match: r.Match, Pattern: r.Pattern}
	if r.Mode != "" {
		j.Mode = &r.Mode
	}
	if r.Measure != "" {
		j.Measure = &r.Measure
	}
	if r.Ops != "" {
		j.Ops = &r.Ops
	}
	if r.Threshold != 0 {
		j.Threshold = &r.Threshold
	}
	if r.Window != 0 {
		s := r.Window.String()
		j.Window = &s
	}
	if r.Hold != 0 {
		s := r.Hold.String()
		j.Hold = &s
	}
	if r.Low != 0 {
		j.Low = &r.Low
	}
	if r.K != 0 {
		j.K = &r.K
	}
	return j
}

// Decode parses and checks a list written as Encode writes it (a "v"
// field, if present, must be NodeVersion). Every field is checked: an
// unknown field, a wrong type or a bad value refuses the whole list with
// an *Error naming the first bad rule.
func Decode(b []byte) (*List, error) {
	if len(b) > MaxBytes {
		return nil, &Error{-1, fmt.Sprintf("%d bytes, at most %d", len(b), MaxBytes)}
	}
	var jl jsonList
	if err := strict(b, &jl); err != nil {
		return nil, &Error{-1, err.Error()}
	}
	if jl.V != 0 && jl.V != NodeVersion {
		return nil, &Error{-1, fmt.Sprintf("unknown encoding version %d", jl.V)}
	}
	if len(jl.Rules) > MaxRules {
		return nil, &Error{-1, fmt.Sprintf("%d rules, at most %d", len(jl.Rules), MaxRules)}
	}
	l := &List{App: jl.App, Version: jl.Version, Rules: make([]Rule, len(jl.Rules))}
	for i, raw := range jl.Rules {
		r, reason := fromJSON(raw)
		if reason != "" {
			return nil, &Error{i, reason}
		}
		l.Rules[i] = r
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	return l, nil
}

// DecodeNode parses a rule list's ZooKeeper node; the caller sets Version
// from the node's own version.
func DecodeNode(b []byte) (*List, error) {
	l, err := Decode(b)
	if err != nil {
		return nil, err
	}
	l.Version = 0
	return l, nil
}

func fromJSON(raw json.RawMessage) (Rule, string) {
	var j jsonRule
	if err := strict(raw, &j); err != nil {
		return Rule{}, err.Error()
	}
	r := Rule{Match: j.Match, Pattern: j.Pattern}
	if j.Mode != nil {
		if r.Mode = *j.Mode; r.Mode == "" {
			return r, `unknown mode "" (threshold, topk or never)`
		}
	}
	if j.Measure != nil {
		if r.Measure = *j.Measure; r.Measure == "" {
			return r, `unknown measure "" (count or bytes)`
		}
	}
	if j.Ops != nil {
		if r.Ops = *j.Ops; r.Ops == "" {
			return r, `unknown ops "" (read, write or any)`
		}
	}
	if j.Threshold != nil {
		if r.Threshold = *j.Threshold; r.Threshold <= 0 {
			return r, fmt.Sprintf("threshold %g is not above 0", r.Threshold)
		}
	}
	if j.Low != nil {
		if r.Low = *j.Low; r.Low <= 0 || r.Low > 1 || math.IsNaN(r.Low) {
			return r, fmt.Sprintf("low %g out of range (0, 1]", r.Low)
		}
	}
	if j.K != nil {
		if r.K = *j.K; r.K < 1 || r.K > MaxK {
			return r, fmt.Sprintf("k %d out of range 1..%d", r.K, MaxK)
		}
	}
	var reason string
	if j.Window != nil {
		if r.Window, reason = duration("window", *j.Window); reason != "" {
			return r, reason
		}
		if reason = checkWindow(r.Window); reason != "" {
			return r, reason
		}
	}
	if j.Hold != nil {
		if r.Hold, reason = duration("hold", *j.Hold); reason != "" {
			return r, reason
		}
		if r.Hold <= 0 {
			return r, fmt.Sprintf("hold %v is not above 0", r.Hold)
		}
	}
	return r, r.check()
}

func duration(field, s string) (time.Duration, string) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Sprintf("%s %q is not a duration (like \"2s\" or \"500ms\")", field, s)
	}
	return d, ""
}

// strict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %q: want a %v, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("bad JSON: %w", err)
	}
	if d.More() {
		return errors.New("bad JSON: data after the list")
	}
	return nil
}
