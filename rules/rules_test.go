package rules

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var def = Default(1000, time.Second, 2*time.Second, 0.8)

func mustCompile(t *testing.T, rs ...Rule) *Set {
	t.Helper()
	s, err := Compile(&List{App: "shop", Rules: rs}, def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMatchFirstWins(t *testing.T) {
	s := mustCompile(t,
		Rule{Match: Prefix, Pattern: "session:", Mode: Never},                               // 0
		Rule{Match: Glob, Pattern: "item:*:price", Threshold: 500, Window: 2 * time.Second}, // 1
		Rule{Match: Exact, Pattern: "item:1:price", Threshold: 5},                           // 2: shadowed by 1
		Rule{Match: Exact, Pattern: "cfg", Measure: Bytes, Threshold: 1 << 20},              // 3
		Rule{Match: Suffix, Pattern: ":count", Ops: Write},                                  // 4
		Rule{Match: Glob, Pattern: "feed:??", Mode: TopK, K: 50},                            // 5
		Rule{Match: Exact, Pattern: "cfg", Threshold: 7},                                    // 6: shadowed by 3
	)
	for _, c := range []struct {
		key  string
		want int
		kind Kind
	}{
		{"session:42", 0, KindCount},
		{"item:1:price", 1, KindCount},
		{"item::price", 1, KindCount},
		{"item:1:prices", -1, KindCount},
		{"cfg", 3, KindBytes},
		{"cfgx", -1, KindCount},
		{"a:count", 4, KindWrite},
		{"feed:ab", 5, KindCount},
		{"feed:é1", 5, KindCount}, // ? is one character
		{"feed:abc", -1, KindCount},
		{"session", -1, KindCount},
	} {
		e := s.Match(c.key)
		if e.Index != c.want || e.Kind() != c.kind {
			t.Errorf("Match(%q) = rule %d kind %s, want %d %s", c.key, e.Index, e.Kind(), c.want, c.kind)
		}
	}
	if e := s.Match("item:9:price"); e.Threshold != 500 || e.Window != 2*time.Second || e.Hold != def.Hold || e.Low != def.Low || e.Mode != Threshold {
		t.Errorf("rule 1 resolved to %+v", e)
	}
	if e := s.Match("feed:xy"); e.K != 50 || e.Mode != TopK {
		t.Errorf("rule 5 resolved to %+v", e)
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, key string
		want         bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b", "abab", true},
		{"*ab", "aab", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\\`, `a\`, true},
		{"**x", "yyx", true},
		{"x*", "x", true},
	} {
		parts, err := parseGlob(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := matchGlob(parts, c.key); got != c.want {
			t.Errorf("glob %q on %q = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

func TestDecodeRefusesBadRules(t *testing.T) {
	good := `{"match":"prefix","pattern":"a:"}`
	for _, c := range []struct {
		rule, reason string
	}{
		{`{"match":"prefix","pattern":"a:","colour":"red"}`, `unknown field "colour"`},
		{`{"match":"prefix","pattern":""}`, "empty pattern"},
		{`{"match":"regex","pattern":"a"}`, "unknown match"},
		{`{"pattern":"a"}`, "missing match"},
		{`{"match":"glob","pattern":"a\\"}`, "unfinished escape"},
		{`{"match":"exact","pattern":"a","window":"150ms"}`, "not a multiple of 100ms"},
		{`{"match":"exact","pattern":"a","window":"61s"}`, "out of range"},
		{`{"match":"exact","pattern":"a","window":"0s"}`, "out of range"},
		{`{"match":"exact","pattern":"a","window":"soon"}`, "not a duration"},
		{`{"match":"exact","pattern":"a","threshold":0}`, "threshold 0 is not above 0"},
		{`{"match":"exact","pattern":"a","threshold":-5}`, "not above 0"},
		{`{"match":"exact","pattern":"a","threshold":"5"}`, `field "threshold"`},
		{`{"match":"exact","pattern":"a","mode":"topk"}`, "k 0 out of range"},
		{`{"match":"exact","pattern":"a","mode":"topk","k":1001}`, "k 1001 out of range"},
		{`{"match":"exact","pattern":"a","k":3}`, "k is for mode topk only"},
		{`{"match":"exact","pattern":"a","mode":"hottest"}`, "unknown mode"},
		{`{"match":"exact","pattern":"a","measure":"weight"}`, "unknown measure"},
		{`{"match":"exact","pattern":"a","ops":"delete"}`, "unknown ops"},
		{`{"match":"exact","pattern":"a","low":1.5}`, "low 1.5 out of range"},
		{`{"match":"exact","pattern":"a","hold":"-1s"}`, "hold -1s"},
	} {
		body := `{"app":"shop","version":3,"rules":[` + good + "," + c.rule + "]}"
		_, err := Decode([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Index != 1 || !strings.Contains(e.Reason, c.reason) {
			t.Errorf("Decode(%s) = %v, want rule 1: ...%s...", c.rule, err, c.reason)
		}
	}
	if _, err := Decode([]byte(`{"app":"shop","rules":[` + good + `]} x`)); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := Decode([]byte(`{"app":"shop","rules":[],"extra":1}`)); err == nil {
		t.Error("unknown list field accepted")
	}
	if _, err := Decode([]byte(`{"v":2,"app":"shop","rules":[]}`)); err == nil {
		t.Error("unknown node version accepted")
	}
	many := `{"app":"shop","rules":[` + strings.Repeat(good+",", MaxRules) + good + `]}`
	var e *Error
	if _, err := Decode([]byte(many)); !errors.As(err, &e) || e.Index != -1 {
		t.Errorf("%d rules: %v, want a list error", MaxRules+1, err)
	}
}

func TestRoundTrip(t *testing.T) {
	in := &List{App: "shop", Version: 4, Rules: []Rule{
		{Match: Glob, Pattern: "item:*", Threshold: 500, Window: 2 * time.Second, Hold: 5 * time.Second, Low: 0.5},
		{Match: Prefix, Pattern: "feed:", Mode: TopK, K: 50},
		{Match: Exact, Pattern: "blob:1", Measure: Bytes, Ops: Any, Threshold: 1e6},
	}}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"app":"shop","version":4,"rules":[{"match":"glob","pattern":"item:*","threshold":500,"window":"2s","hold":"5s","low":0.5},` +
		`{"match":"prefix","pattern":"feed:","mode":"topk","k":50},{"match":"exact","pattern":"blob:1","measure":"bytes","ops":"any","threshold":1000000}]}`
	if string(b) != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", b, want)
	}
	out, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.App != in.App || out.Version != in.Version || len(out.Rules) != len(in.Rules) {
		t.Fatalf("round trip: %+v", out)
	}
	for i := range in.Rules {
		if out.Rules[i] != in.Rules[i] {
			t.Errorf("rule %d: got %+v, want %+v", i, out.Rules[i], in.Rules[i])
		}
	}
	node, err := EncodeNode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(node), `{"v":1,"app":"shop","version":0,`) {
		t.Errorf("node = %s", node)
	}
	if l, err := DecodeNode(node); err != nil || len(l.Rules) != 3 {
		t.Errorf("DecodeNode = %v, %v", l, err)
	}
}

func TestEmptySetIsDefault(t *testing.T) {
	s, err := Compile(nil, def)
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Match("x"); e != def {
		t.Errorf("Match = %+v, want the default %+v", e, def)
	}
}

func BenchmarkMatch100Rules(b *testing.B) {
	var rs []Rule
	for i := range 100 {
		rs = append(rs, Rule{Match: []Match{Exact, Prefix, Suffix, Glob}[i%4], Pattern: "p" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "*"})
	}
	s, err := Compile(&List{Rules: rs}, def)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.Match("item:123456:price")
	}
}
