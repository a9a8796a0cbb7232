package hotset

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"shop", "shop"},
		{"a/b", "a%2Fb"},
		{"", "%_"},
		{".", "%2E_"},
		{"..", "%2E2E_"},
		{"...", "..."},
		{"ü x", "%C3%BC%20x"},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := Unescape(Escape(tt.in)); err != nil || back != tt.in {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", tt.in, back, err)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "%", "%2E_", "app:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if e == "" || e == "." || e == ".." || strings.Contains(e, "/") {
			t.Fatalf("Escape(%q) = %q is not a valid znode name", s, e)
		}
		back, err := Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
	})
}

func TestShardRoundTrip(t *testing.T) {
	in := &Shard{App: "shop", Shard: "agg-1", Updated: 1700000000000, TTL: 10000,
		Keys: []Key{{Key: "item:42", Rate: 3000.5, Since: 1699999999000}}}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.V != Version || out.App != in.App || len(out.Keys) != 1 || out.Keys[0] != in.Keys[0] {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
	if out.Expired(time.UnixMilli(in.Updated + in.TTL)) {
		t.Error("expired at exactly Updated+TTL, want valid")
	}
	if !out.Expired(time.UnixMilli(in.Updated + in.TTL + 1)) {
		t.Error("not expired after Updated+TTL")
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, b := range []string{`{"v":2,"keys":[]}`, `not json`, `{"v":"1"}`} {
		if _, err := Decode([]byte(b)); err == nil {
			t.Errorf("Decode(%s) = nil error, want one", b)
		}
	}
}

func TestEncodeTooLarge(t *testing.T) {
	s := &Shard{App: "a", Shard: "s"}
	for i := range 20000 {
		s.Keys = append(s.Keys, Key{Key: strings.Repeat("k", 40) + string(rune('a'+i%26)), Rate: 1e6})
	}
	if _, err := Encode(s); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Encode of a huge shard: err = %v, want ErrTooLarge", err)
	}
}

func TestOperatorNodesAreNoShardName(t *testing.T) {
	for _, n := range []string{PinsNode, BlocksNode} {
		if _, err := Unescape(n); err == nil {
			t.Errorf("Unescape(%q) succeeded: an escaped shard id could take the operator node's name", n)
		}
	}
	if got := PinsPath("/hotspot", "a/b"); got != "/hotspot/hot/a%2Fb/%pins" {
		t.Errorf("PinsPath = %q", got)
	}
}
