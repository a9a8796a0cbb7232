package wire_test

import (
	"errors"
	"fmt"
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

// TestPartialsExtras: a batch with sources or effects is version 7 and
// hands them to DecodePartialsWith after its counts; one without stays
// version 5, which a shard that predates version 6 still takes; a
// version 6 batch (sources without a total) still decodes.
func TestPartialsExtras(t *testing.T) {
	b := &wire.PartialBatch{Source: "d", At: 5, End: 5, Seq: 1,
		Groups: []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "item:42", Count: 30}}}}}
	if v := wire.AppendPartials(nil, b)[1]; v != 5 {
		t.Errorf("without sources or effects: version %d, want 5", v)
	}
	b.Sources = []wire.PartialSources{{App: "shop", Key: "item:42", Total: 40,
		Top:      []wire.SourceCount{{"pod-1", 21}, {"", 3}, {"pod-2", 0}, {"pod-3", 6}},
		Distinct: []byte("sketch")}}
	b.Effects = []wire.PartialEffect{{App: "shop", Key: "item:42", EffectCounts: wire.EffectCounts{L1Hits: 900, L2Reads: 90, SourceLoads: 2, Limited: 10}}}
	body := wire.AppendPartials(nil, b)
	if body[1] != 7 {
		t.Fatalf("with sources: version %d, want 7", body[1])
	}
	var order []string
	_, err := wire.DecodePartialsWith(body, func(_, key []byte, n, _, _, _ uint64) { order = append(order, "count "+string(key)) },
		wire.PartialExtras{
			Sources: func(app, key []byte, total uint64, top []wire.SourceCount, distinct []byte) {
				want := []wire.SourceCount{{"pod-1", 21}, {"pod-3", 6}} // the empty and the 0 left out
				if string(app) != "shop" || total != 40 || !reflect.DeepEqual(top, want) || string(distinct) != "sketch" {
					t.Errorf("sources of %s/%s: %d %+v %q", app, key, total, top, distinct)
				}
				order = append(order, "sources "+string(key))
			},
			Effect: func(_, key []byte, c wire.EffectCounts) {
				if c != b.Effects[0].EffectCounts {
					t.Errorf("effect of %s: %+v", key, c)
				}
				order = append(order, "effect "+string(key))
			},
		})
	if want := []string{"count item:42", "sources item:42", "effect item:42"}; err != nil || !reflect.DeepEqual(order, want) {
		t.Errorf("delivered %v, %v; want %v", order, err, want)
	}
	if _, err := wire.DecodePartials(body, func(_, _ []byte, _, _, _, _ uint64) {}); err != nil {
		t.Errorf("DecodePartials of version 7: %v", err)
	}
	// Version 6, by hand: source "d", at 5, span 0, end 5, seq 1, no
	// weights, no groups; one sources entry (app "a", key "k", one source
	// "p" of 3, sketch "s"); no effects.
	v6 := hx(t, "a6 06 01 64 05 00 05 01 00 00 | 01 01 61 01 6b 01 01 70 03 01 73 | 00")
	var got []string
	_, err = wire.DecodePartialsWith(v6, func(_, _ []byte, _, _, _, _ uint64) {}, wire.PartialExtras{
		Sources: func(app, key []byte, total uint64, top []wire.SourceCount, distinct []byte) {
			got = append(got, fmt.Sprintf("%s/%s %d %v %s", app, key, total, top, distinct))
		}})
	if want := []string{"a/k 0 [{p 3}] s"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("version 6: %v, %v; want %v", got, err, want)
	}
	b.Sources[0].Top = make([]wire.SourceCount, wire.MaxTopSources+5)
	for i := range b.Sources[0].Top {
		b.Sources[0].Top[i] = wire.SourceCount{Src: strings.Repeat("s", i+1), N: 1}
	}
	n := 0
	wire.DecodePartialsWith(wire.AppendPartials(nil, b), func(_, _ []byte, _, _, _, _ uint64) {},
		wire.PartialExtras{Sources: func(_, _ []byte, _ uint64, top []wire.SourceCount, _ []byte) { n = len(top) }})
	if n != wire.MaxTopSources {
		t.Errorf("%d sources written, want at most %d", n, wire.MaxTopSources)
	}
}

// TestPartialsInstances: a batch with instances is version 8 and hands
// them to DecodePartialsWith after its effects, an instance without a name
// left out; a truncated or nameless instance fails the whole batch.
func TestPartialsInstances(t *testing.T) {
	b := &wire.PartialBatch{Source: "d", At: 5, End: 5, Seq: 1,
		Effects: []wire.PartialEffect{{App: "shop", Key: "item:42", EffectCounts: wire.EffectCounts{L1Hits: 900}}},
		Instances: []wire.PartialInstance{
			{App: "shop", Src: "pod-1", EffectCounts: wire.EffectCounts{L1Hits: 600, L2Reads: 6, SourceLoads: 1, Limited: 2}},
			{App: "shop", Src: "", EffectCounts: wire.EffectCounts{L1Hits: 1}},
			{App: "", Src: "pod-2", EffectCounts: wire.EffectCounts{L1Hits: 300}},
		}}
	body := wire.AppendPartials(nil, b)
	if body[1] != 8 {
		t.Fatalf("with instances: version %d, want 8", body[1])
	}
	var got []string
	_, err := wire.DecodePartialsWith(body, func(_, _ []byte, _, _, _, _ uint64) {}, wire.PartialExtras{
		Effect: func(app, key []byte, c wire.EffectCounts) {
			got = append(got, fmt.Sprintf("effect %s/%s %v", app, key, c))
		},
		Instance: func(app, src []byte, c wire.EffectCounts) {
			got = append(got, fmt.Sprintf("instance %s/%s %v", app, src, c))
		}})
	want := []string{"effect shop/item:42 {900 0 0 0}", "instance shop/pod-1 {600 6 1 2}", "instance /pod-2 {300 0 0 0}"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("delivered %q, %v; want %q", got, err, want)
	}
	if _, err := wire.DecodePartials(body, func(_, _ []byte, _, _, _, _ uint64) {}); err != nil {
		t.Errorf("DecodePartials of version 8: %v", err)
	}
	b.Instances = nil
	if v := wire.AppendPartials(nil, b)[1]; v != 7 {
		t.Errorf("effects without instances: version %d, want 7", v)
	}
	// By hand: source "d", at 5, span 0, end 5, seq 1, no weights, no
	// groups, no sources, no effects, then the instances.
	for _, tc := range []struct{ name, in, reason string }{
		{"truncated", "a6 08 01 64 05 00 05 01 00 00 | 00 00 | 01 01 61 01 70 01 02 03", "truncated"},
		{"nameless", "a6 08 01 64 05 00 05 01 00 00 | 00 00 | 01 01 61 00 01 02 03 04", "empty_key"},
		{"trailing", "a6 08 01 64 05 00 05 01 00 00 | 00 00 | 01 01 61 01 70 01 02 03 04 | 00", "trailing_data"},
	} {
		n := 0
		_, err := wire.DecodePartialsWith(hx(t, tc.in), func(_, _ []byte, _, _, _, _ uint64) {},
			wire.PartialExtras{Instance: func(_, _ []byte, _ wire.EffectCounts) { n++ }})
		var we *wire.Error
		if !errors.As(err, &we) || we.Reason.String() != tc.reason || n != 0 {
			t.Errorf("%s: %v after %d instances, want %s and none", tc.name, err, n, tc.reason)
		}
	}
	ok := hx(t, "a6 08 01 64 05 00 05 01 00 00 | 00 00 | 01 01 61 01 70 01 02 03 04")
	if _, err := wire.DecodePartials(ok, func(_, _ []byte, _, _, _, _ uint64) {}); err != nil {
		t.Errorf("a valid instance by hand: %v", err)
	}
}

// TestPartialsReach: a batch with a Reach is version 9, reads back with it
// and with everything else of version 8; without one it is written as
// before, so that a shard not yet upgraded takes it.
func TestPartialsReach(t *testing.T) {
	b := &wire.PartialBatch{Source: "d", At: 900, Span: 100, End: 800, Seq: 3, Reach: 650, Step: 100, Weights: []uint64{2, 1},
		Groups:    []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "k", Count: 3}}}},
		Instances: []wire.PartialInstance{{App: "shop", Src: "pod-1", EffectCounts: wire.EffectCounts{L1Hits: 7}}}}
	body := wire.AppendPartials(nil, b)
	if body[1] != 9 {
		t.Fatalf("with a reach: version %d, want 9", body[1])
	}
	h, err := wire.ReadPartialHeader(body)
	want := wire.PartialHeader{Source: "d", At: 900, Span: 100, End: 800, Seq: 3, Reach: 650, Step: 100, Weights: []uint64{2, 1}}
	if err != nil || !reflect.DeepEqual(h, want) {
		t.Fatalf("header %+v, %v; want %+v", h, err, want)
	}
	var got []string
	_, err = wire.DecodePartialsWith(body, func(app, key []byte, n, _, _, _ uint64) {
		got = append(got, fmt.Sprintf("%s/%s %d", app, key, n))
	}, wire.PartialExtras{Instance: func(app, src []byte, c wire.EffectCounts) {
		got = append(got, fmt.Sprintf("instance %s/%s %d", app, src, c.L1Hits))
	}})
	if err != nil || !reflect.DeepEqual(got, []string{"shop/k 3", "instance shop/pod-1 7"}) {
		t.Errorf("delivered %q, %v", got, err)
	}
	// A round with no counts and a reach: the detector is waiting for a
	// partition, not idle.
	empty := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 900, Seq: 4, Reach: 650})
	if h, err := wire.ReadPartialHeader(empty); err != nil || h.Reach != 650 || h.End != 0 {
		t.Errorf("an empty round with a reach: %+v, %v", h, err)
	}
	b.Reach = 0
	if v := wire.AppendPartials(nil, b)[1]; v != 8 {
		t.Errorf("without a reach: version %d, want 8", v)
	}
	if _, err := wire.ReadPartialHeader(hx(t, "a6 09 01 64 05 00 05 01")); err == nil {
		t.Error("a version 9 header cut before its reach was read")
	}
}
