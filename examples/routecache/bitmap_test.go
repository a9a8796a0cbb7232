package routecache

import (
	"bytes"
	"errors"
	"testing"
)

func TestCodec(t *testing.T) {
	v1of := func(s Shards) []byte {
		b, err := EncodeV1(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want []int
	}{
		{"v1 upgraded", v1of(ShardsOf(0, 3, 15)), []int{0, 3, 15}},
		{"v1 empty", []byte{1, 0, 0}, nil},
		{"v2 small", Encode(ShardsOf(2)), []int{2}},
		{"v2 wide", Encode(ShardsOf(1, 16, 700)), []int{1, 16, 700}},
		{"v2 empty", Encode(Shards{}), nil},
	}
	for _, tt := range tests {
		got, err := Decode(tt.in)
		if err != nil || !got.Equal(ShardsOf(tt.want...)) {
			t.Errorf("%s: Decode(%x) = %v, %v; want %v", tt.name, tt.in, got, err, tt.want)
		}
		if again, err := Decode(Encode(got)); err != nil || !again.Equal(got) {
			t.Errorf("%s: v2 round trip = %v, %v; want %v", tt.name, again, err, got)
		}
	}
	if b := Encode(ShardsOf(2)); !bytes.Equal(b, []byte{2, 8, 4}) {
		t.Errorf("Encode({2}) = %x, want 020804", b)
	}
	for _, bad := range [][]byte{nil, {9}, {1, 0}, {2}, {2, 8}, {2, 7, 0}, {2, 16, 1}, {2, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := Decode(bad); !errors.Is(err, errBadValue) {
			t.Errorf("Decode(%x) error = %v, want errBadValue", bad, err)
		}
	}
	if _, err := EncodeV1(ShardsOf(16)); err == nil {
		t.Error("EncodeV1 of shard 16: nil error, want one")
	}
}

func TestShardsOr(t *testing.T) {
	a, b := ShardsOf(1, 9), ShardsOf(9, 30)
	if got := a.Or(b); !got.Equal(ShardsOf(1, 9, 30)) {
		t.Errorf("Or = %v, want [1 9 30]", got)
	}
	if got := a.With(9); !got.Equal(a) {
		t.Errorf("With an existing shard = %v, want %v", got, a)
	}
	if !a.Equal(ShardsOf(1, 9)) {
		t.Errorf("Or and With changed their receiver: %v", a)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{1, 0, 9})
	f.Add(Encode(ShardsOf(3, 300)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if again, err := Decode(Encode(s)); err != nil || !again.Equal(s) {
			t.Fatalf("round trip of %x: %v, %v; want %v", b, again, err, s)
		}
	})
}
