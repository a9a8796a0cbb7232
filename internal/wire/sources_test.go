package wire_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// effect is a decoded effect entry, copied.
type effect struct {
	App, Src, Key string
	End, Period   int64
	wire.EffectCounts
}

// decodeEffects decodes an effect batch with OnEffect and returns copies of
// its entries.
func decodeEffects(in []byte) ([]effect, error) {
	var got []effect
	d := wire.Decoder{OnEffect: func(e *wire.EffectEntry) {
		got = append(got, effect{string(e.App), string(e.Src), string(e.Key), e.End, e.Period, e.EffectCounts})
	}}
	err := d.Decode(in, func(*wire.Entry) { panic("an effect batch delivered an access") })
	return got, err
}

// TestSourcedBatch: a version 3 batch carries its source to every entry; an
// empty source writes version 2.
func TestSourcedBatch(t *testing.T) {
	as := []wire.Access{{"item:42", 3, 12288, wire.OpRead}, {"cart:7", 1, 0, wire.OpWrite}}
	for _, src := range []string{"pod-7/1234", ""} {
		b := wire.AppendAccessesFrom(nil, "shop", src, 1700000000000, as)
		want := byte(3)
		if src == "" {
			want = 2
		}
		if b[1] != want {
			t.Errorf("source %q: version %d, want %d", src, b[1], want)
		}
		var d wire.Decoder
		var srcs []string
		var got []rec
		if err := d.Decode(b, func(e *wire.Entry) { got, srcs = append(got, copyEntry(e)), append(srcs, string(e.Src)) }); err != nil {
			t.Fatalf("source %q: %v", src, err)
		}
		wantRecs := []rec{{"shop", "item:42", 3, 1700000000000, 12288, wire.OpRead}, {"shop", "cart:7", 1, 1700000000000, 0, wire.OpWrite}}
		if !reflect.DeepEqual(got, wantRecs) || !reflect.DeepEqual(srcs, []string{src, src}) {
			t.Errorf("source %q: decoded %+v from %q", src, got, srcs)
		}
	}
	for _, tc := range []struct {
		name, in string
		want     wire.Reason
	}{
		{"source too long", "a5 03 00 05 6c 6f 6e 67 21 00 00", wire.ReasonBadValue}, // MaxKeyLen 3 below
		{"source not UTF-8", "a5 03 00 01 ff 00 00", wire.ReasonBadUTF8},
		{"source past the end", "a5 03 00 03 61", wire.ReasonTruncated},
	} {
		d := wire.Decoder{MaxKeyLen: 3}
		if r, _ := reasonOf(t, d.Decode(hx(t, tc.in), func(*wire.Entry) {})); r != tc.want {
			t.Errorf("%s: reason %v, want %v", tc.name, r, tc.want)
		}
	}
}

func TestJSONSource(t *testing.T) {
	b := wire.AppendJSON(nil, wire.Event{App: "shop", Key: "k", Src: "10.0.0.7"})
	if got, want := string(b), `{"key":"k","app":"shop","src":"10.0.0.7"}`; got != want {
		t.Errorf("AppendJSON = %s, want %s", got, want)
	}
	var d wire.Decoder
	var src string
	if err := d.Decode(b, func(e *wire.Entry) { src = string(e.Src) }); err != nil || src != "10.0.0.7" {
		t.Errorf("Decode(%s): src %q, %v", b, src, err)
	}
	for _, tc := range []struct {
		in   string
		want wire.Reason
	}{
		{`{"key":"k","src":5}`, wire.ReasonWrongType},
		{`{"key":"k","src":"` + strings.Repeat("s", wire.DefaultMaxKeyLen+1) + `"}`, wire.ReasonBadValue},
	} {
		var d wire.Decoder
		if r, _ := reasonOf(t, d.Decode([]byte(tc.in), func(*wire.Entry) {})); r != tc.want {
			t.Errorf("Decode(%.40s...): reason %v, want %v", tc.in, r, tc.want)
		}
	}
	if err := d.Decode([]byte(`{"key":"k","src":null}`), func(e *wire.Entry) { src = string(e.Src) }); err != nil || src != "" {
		t.Errorf(`"src":null: src %q, %v; want none`, src, err)
	}
}

// TestEffectBatch: an effect batch reaches OnEffect entry by entry and never
// the access callback; without OnEffect it is accepted and skipped.
func TestEffectBatch(t *testing.T) {
	es := []wire.Effect{
		{Key: "item:42", EffectCounts: wire.EffectCounts{L1Hits: 9000, L2Reads: 800, SourceLoads: 3, Limited: 200}},
		{Key: "", EffectCounts: wire.EffectCounts{L1Hits: 1}}, // left out: empty key
		{Key: "cold", EffectCounts: wire.EffectCounts{}},      // left out: nothing to say
		{Key: "cart:7", EffectCounts: wire.EffectCounts{L2Reads: 5}},
	}
	b := wire.AppendEffects(nil, "shop", "pod-7", 1700000005000, 5000, es)
	got, err := decodeEffects(b)
	want := []effect{
		{"shop", "pod-7", "item:42", 1700000005000, 5000, es[0].EffectCounts},
		{"shop", "pod-7", "cart:7", 1700000005000, 5000, es[3].EffectCounts},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, want)
	}
	var d wire.Decoder
	if err := d.Decode(b, func(*wire.Entry) { t.Error("an effect batch delivered an access") }); err != nil {
		t.Errorf("without OnEffect: %v", err)
	}
	// Hand-written: app "a", source "s", end 1, period 2, one entry.
	got, err = decodeEffects(hx(t, "a5 04 01 61 01 73 01 02 01 | 01 6b 01 02 03 04"))
	if want := []effect{{"a", "s", "k", 1, 2, wire.EffectCounts{1, 2, 3, 4}}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("hand-written batch: %+v, %v; want %+v", got, err, want)
	}
	if _, err := decodeEffects(hx(t, "a5 04 01 61 01 73 01 02 01 | 01 6b 01 02 03")); err == nil {
		t.Errorf("truncated entry accepted")
	}
}
