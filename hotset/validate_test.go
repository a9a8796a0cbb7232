package hotset

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7070", true},
		{"[::1]:7070", true},
		{"agg-1.example.com:443", true},
		{"localhost:1", true},
		{"host/steal?x=:80", false},
		{"host/steal?x=", false},
		{"user@host:80", false},
		{"host:80/path", false},
		{"host:0", false},
		{"host:65536", false},
		{"host:+80", false},
		{"host:080", false},
		{":80", false},
		{"ho st:80", false},
		{"host..x:80", false},
		{"host#frag:80", false},
		{"host", false},
	}
	for _, tt := range tests {
		err := checkAddr(tt.addr)
		if got := err == nil; got != tt.ok {
			t.Errorf("checkAddr(%q) = %v, want ok %v", tt.addr, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkAddr(%q) = %v, does not wrap ErrInvalid", tt.addr, err)
		}
	}
}

func TestDecodeValidates(t *testing.T) {
	many := make([]string, maxKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"k":"k%d","r":1,"s":1}`, i)
	}
	tests := []struct {
		name string
		node string
		ok   bool
	}{
		{"good", `{"v":1,"app":"a","shard":"s","updated":1,"ttl":10000,"keys":[{"k":"x","r":5,"s":1}]}`, true},
		{"pins", fmt.Sprintf(`{"v":1,"app":"a","shard":"%%pins","updated":1,"ttl":%d,"keys":[{"k":"x","r":0,"s":1,"src":"pinned"}]}`, PinTTL), true},
		{"ttl 0", `{"v":1,"app":"a","updated":1,"ttl":0,"keys":[]}`, false},
		{"ttl negative", `{"v":1,"app":"a","updated":1,"ttl":-5,"keys":[]}`, false},
		{"ttl over bound", fmt.Sprintf(`{"v":1,"app":"a","updated":1,"ttl":%d,"keys":[]}`, maxTTL+1), false},
		{"ttl near MaxInt64", `{"v":1,"app":"a","updated":1,"ttl":9223372036854775807,"keys":[]}`, false},
		{"empty key", `{"v":1,"app":"a","updated":1,"ttl":10,"keys":[{"k":"","r":1}]}`, false},
		{"negative rate", `{"v":1,"app":"a","updated":1,"ttl":10,"keys":[{"k":"x","r":-1}]}`, false},
		{"unknown source", `{"v":1,"app":"a","updated":1,"ttl":10,"keys":[{"k":"x","r":1,"src":"evil"}]}`, false},
		{"long key", `{"v":1,"app":"a","updated":1,"ttl":10,"keys":[{"k":"` + strings.Repeat("x", maxKeyLen+1) + `","r":1}]}`, false},
		{"too many keys", `{"v":1,"app":"a","updated":1,"ttl":10,"keys":[` + strings.Join(many, ",") + `]}`, false},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.node))
		if got := err == nil; got != tt.ok {
			t.Errorf("%s: Decode = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestDecodeMemberValidates(t *testing.T) {
	tests := []struct {
		node string
		ok   bool
	}{
		{`{"v":1,"id":"a1","addr":"127.0.0.1:7070"}`, true},
		{`{"v":1,"id":"a1","addr":"host/steal?x="}`, false},
		{`{"v":1,"id":"a1","addr":""}`, false},
		{`{"v":1,"id":"","addr":"127.0.0.1:7070"}`, false},
	}
	for _, tt := range tests {
		_, err := DecodeMember([]byte(tt.node))
		if got := err == nil; got != tt.ok {
			t.Errorf("DecodeMember(%s) = %v, want ok %v", tt.node, err, tt.ok)
		}
	}
}

// FuzzDecode: no panic, and whatever decodes is within the bounds and
// survives a re-encoding.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"app":"a","shard":"s","updated":1,"ttl":10000,"keys":[{"k":"x","r":5,"s":1}]}`))
	f.Add([]byte(`{"v":1,"app":"a","updated":1,"ttl":0,"keys":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if s.TTL <= 0 || s.TTL > maxTTL || len(s.Keys) > maxKeys {
			t.Fatalf("Decode(%q) accepted %+v", b, s)
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", b, err)
		}
		if _, err := Decode(enc); err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", enc, err)
		}
	})
}

// FuzzDecodeMember: no panic, and every accepted address is host:port.
func FuzzDecodeMember(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"a1","addr":"127.0.0.1:7070"}`))
	f.Add([]byte(`{"v":1,"id":"a1","addr":"host/steal?x="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMember(b)
		if err != nil {
			return
		}
		if strings.ContainsAny(m.Addr, "/?#@ \\") || m.ID == "" {
			t.Fatalf("DecodeMember(%q) accepted %+v", b, m)
		}
	})
}

func TestValidateRuleAndKind(t *testing.T) {
	idx := func(i int) *int { return &i }
	for _, c := range []struct {
		key  Key
		good bool
	}{
		{Key{Key: "a", Rule: idx(-1), Kind: "count"}, true},
		{Key{Key: "a", Rule: idx(999), Kind: "write"}, true},
		{Key{Key: "a", Kind: "bytes"}, true},
		{Key{Key: "a", Rule: idx(-2)}, false},
		{Key{Key: "a", Rule: idx(1000)}, false},
		{Key{Key: "a", Kind: "reads"}, false},
	} {
		s := &Shard{V: Version, App: "shop", Shard: "s", TTL: 10000, Keys: []Key{c.key}}
		b, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(b)
		if got := err == nil; got != c.good {
			t.Errorf("Decode(%s) = %v, want good=%v", b, err, c.good)
		}
	}
}
