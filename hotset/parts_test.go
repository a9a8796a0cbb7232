package hotset

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
)

func TestPartOf(t *testing.T) {
	// The split is a contract between writers and readers of every
	// version: FNV-1a 32 of the key, modulo the parts.
	tests := []struct {
		key  string
		n    int
		want int
	}{
		{"", 16, 5},       // FNV-1a offset basis 0x811c9dc5
		{"a", 16, 12},     // 0xe40c292c
		{"item:42", 1, 0}, // a single part holds everything
	}
	for _, tt := range tests {
		if got := PartOf(tt.key, tt.n); got != tt.want {
			t.Errorf("PartOf(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
		}
	}
}

func TestSplitKeepsOrderAndKeys(t *testing.T) {
	s := &Shard{Keys: []Key{{Key: "a", Rate: 9}, {Key: "b", Rate: 8}, {Key: "c", Rate: 7}, {Key: "d", Rate: 6}}}
	var all []Key
	for i, p := range Split(s, 3) {
		for j, k := range p {
			if PartOf(k.Key, 3) != i {
				t.Errorf("key %q in part %d, want %d", k.Key, i, PartOf(k.Key, 3))
			}
			if j > 0 && p[j-1].Rate < k.Rate {
				t.Errorf("part %d not sorted by rate: %v", i, p)
			}
		}
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b Key) int { return int(b.Rate - a.Rate) })
	if !slices.Equal(all, s.Keys) {
		t.Errorf("parts hold %v, want %v", all, s.Keys)
	}
}

func TestLeaseAndPartRoundTrip(t *testing.T) {
	l := Lease{App: "shop", Shard: "n1", Updated: 1764431590512, TTL: 10_000, Parts: 2,
		Gen: []uint64{7, 9}, Rates: [][]float64{{2990, 12.5}, {}}}
	b, err := EncodeLease(l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeLease(b)
	l.V = Version
	if err != nil || !reflect.DeepEqual(got, l) {
		t.Errorf("DecodeLease(EncodeLease(%+v)) = %+v, %v", l, got, err)
	}
	rule := 2
	keys := []Key{{Key: "item:42", Rate: 2991, Since: 1764431589012, Rule: &rule, Kind: "bytes"}}
	b, err = EncodePart(3, keys)
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodePart(b)
	if err != nil || p.Gen != 3 || len(p.Keys) != 1 || p.Keys[0].Key != "item:42" || *p.Keys[0].Rule != 2 || p.Keys[0].Kind != "bytes" {
		t.Errorf("DecodePart(EncodePart(%+v)) = %+v, %v", keys, p, err)
	}
	if b, _ := EncodePart(1, nil); string(b) != `{"v":1,"gen":1,"keys":[]}` {
		t.Errorf("EncodePart(nil) = %s, want an empty list", b)
	}
}

func TestDecodeLeaseAndPartReject(t *testing.T) {
	tests := []struct {
		name string
		data string
		part bool
	}{
		{"lease of an unknown version", `{"v":2,"ttl":1000,"parts":1,"gen":[1],"r":[[]]}`, false},
		{"lease without a ttl", `{"v":1,"ttl":0,"parts":1,"gen":[1],"r":[[]]}`, false},
		{"lease without parts", `{"v":1,"ttl":1000,"parts":0,"gen":[],"r":[]}`, false},
		{"lease with too many parts", `{"v":1,"ttl":1000,"parts":100000}`, false},
		{"lease with a gen missing", `{"v":1,"ttl":1000,"parts":2,"gen":[1],"r":[[],[]]}`, false},
		{"lease with a rate list missing", `{"v":1,"ttl":1000,"parts":2,"gen":[1,2],"r":[[]]}`, false},
		{"lease with a negative rate", `{"v":1,"ttl":1000,"parts":1,"gen":[1],"r":[[-1]]}`, false},
		{"lease that is not JSON", `{`, false},
		{"part of an unknown version", `{"v":2,"keys":[]}`, true},
		{"part with an empty key", `{"v":1,"keys":[{"k":"","r":1}]}`, true},
		{"part with a negative rate", `{"v":1,"keys":[{"k":"a","r":-1}]}`, true},
		{"part with an unknown kind", `{"v":1,"keys":[{"k":"a","r":1,"kind":"x"}]}`, true},
	}
	for _, tt := range tests {
		var err error
		if tt.part {
			_, err = DecodePart([]byte(tt.data))
		} else {
			_, err = DecodeLease([]byte(tt.data))
		}
		if err == nil {
			t.Errorf("%s: decoded, want an error", tt.name)
		}
	}
	if _, err := DecodeLease([]byte(`{"v":1,"ttl":-5,"parts":1,"gen":[1],"r":[[]]}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative ttl: %v, want ErrInvalid", err)
	}
}

func FuzzDecodePart(f *testing.F) {
	f.Add([]byte(`{"v":1,"keys":[{"k":"a","r":1,"s":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePart(b)
		if err != nil {
			return // reject bad input; never panic
		}
		again, err := EncodePart(p.Gen, p.Keys)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := DecodePart(again); err != nil {
			t.Fatalf("a decoded part does not decode again: %v", err)
		}
	})
}

func TestRoundRate(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{2991.0432, 2990}, {12.345, 12.3}, {0.04567, 0.0457}, {0, 0}, {999.7, 1000}, {1.5e9, 1.5e9},
	}
	for _, tt := range tests {
		if got := RoundRate(tt.in); math.Abs(got-tt.want) > 1e-9*tt.want {
			t.Errorf("RoundRate(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
