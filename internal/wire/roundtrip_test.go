package wire_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

func TestBatchRoundTrip(t *testing.T) {
	long := strings.Repeat("L", wire.DefaultMaxKeyLen)
	tests := []struct {
		name    string
		app     string
		start   int64
		entries []wire.KeyCount
		want    []rec
	}{
		{"empty batch", "shop", 1700000000000, nil, nil},
		{"entries", "shop", 1700000000000, []wire.KeyCount{{Key: "item:42", Count: 3}, {Key: "cart:7", Count: 1}, {Key: "item:42", Count: 1<<64 - 1}},
			[]rec{{"shop", "item:42", 3, 1700000000000, 0, 0}, {"shop", "cart:7", 1, 1700000000000, 0, 0}, {"shop", "item:42", 1<<64 - 1, 1700000000000, 0, 0}}},
		{"default app, no time", "", 0, []wire.KeyCount{{Key: "k", Count: 1}}, []rec{{"default", "k", 1, 0, 0, 0}}},
		{"negative time written as 0", "a", -5, []wire.KeyCount{{Key: "k", Count: 1}}, []rec{{"a", "k", 1, 0, 0, 0}}},
		{"binary keys", "a", 1, []wire.KeyCount{{Key: "\x00\n{", Count: 2}}, []rec{{"a", "\x00\n{", 2, 1, 0, 0}}},
		{"keys not UTF-8 left out", "a", 1, []wire.KeyCount{{Key: "item:\xff", Count: 2}, {Key: "item:\xfe", Count: 3}, {Key: "item:é", Count: 4}}, []rec{{"a", "item:é", 4, 1, 0, 0}}},
		{"invalid entries left out", "a", 1, []wire.KeyCount{{Key: "", Count: 1}, {Key: "z", Count: 0}, {Key: long + "x", Count: 1}, {Key: long, Count: 9}},
			[]rec{{"a", long, 9, 1, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := wire.AppendBatch([]byte("prefix"), tt.app, tt.start, tt.entries)
			if string(b[:6]) != "prefix" {
				t.Fatalf("AppendBatch did not append to dst")
			}
			var d wire.Decoder
			got, err := decodeAll(&d, b[6:])
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("round trip\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestAccessesRoundTrip(t *testing.T) {
	long := strings.Repeat("L", wire.DefaultMaxKeyLen)
	const ts = 1700000000000
	tests := []struct {
		name    string
		app     string
		start   int64
		entries []wire.Access
		want    []rec
	}{
		{"empty batch", "shop", ts, nil, nil},
		{"reads and writes of one key", "shop", ts,
			[]wire.Access{{"item:42", 3, 12288, wire.OpRead}, {"item:42", 1, 4096, wire.OpWrite}, {"cart:7", 300, 0, wire.OpRead}},
			[]rec{{"shop", "item:42", 3, ts, 12288, wire.OpRead}, {"shop", "item:42", 1, ts, 4096, wire.OpWrite}, {"shop", "cart:7", 300, ts, 0, wire.OpRead}}},
		{"a delete: a write of no bytes", "a", 1, []wire.Access{{"k", 1, 0, wire.OpWrite}}, []rec{{"a", "k", 1, 1, 0, wire.OpWrite}}},
		{"largest values", "", 0, []wire.Access{{"k", 1<<64 - 1, 1<<64 - 1, wire.OpRead}}, []rec{{"default", "k", 1<<64 - 1, 0, 1<<64 - 1, wire.OpRead}}},
		{"negative time written as 0", "a", -5, []wire.Access{{"k", 1, 5, 0}}, []rec{{"a", "k", 1, 0, 5, 0}}},
		{"invalid entries left out", "a", 1,
			[]wire.Access{{"", 1, 1, 0}, {"z", 0, 9, 0}, {long + "x", 1, 0, 0}, {"item:\xff", 1, 0, 0}, {"op", 1, 0, wire.Op(2)}, {long, 9, 7, wire.OpWrite}},
			[]rec{{"a", long, 9, 1, 7, wire.OpWrite}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := wire.AppendAccesses([]byte("prefix"), tt.app, tt.start, tt.entries)
			if string(b[:6]) != "prefix" {
				t.Fatalf("AppendAccesses did not append to dst")
			}
			if b[6] != 0xa5 || b[7] != 2 {
				t.Fatalf("magic and version % x, want a5 02", b[6:8])
			}
			var d wire.Decoder
			got, err := decodeAll(&d, b[6:])
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("round trip\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestDecodeVersions decodes hand-written batches of each version: a
// version 1 entry is a read without bytes; version 2 varints may be
// non-minimal, like every varint.
func TestDecodeVersions(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []rec
	}{
		{"version 1", "a5 01 00 00 01 01 6b 03", []rec{{"default", "k", 3, 0, 0, wire.OpRead}}},
		{"version 2 read", "a5 02 00 00 01 01 6b 03 00 ac02", []rec{{"default", "k", 3, 0, 300, wire.OpRead}}},
		{"version 2 write", "a5 02 00 00 01 01 6b 01 01 00", []rec{{"default", "k", 1, 0, 0, wire.OpWrite}}},
		{"version 2 non-minimal op", "a5 02 00 00 02 01 6b 01 8100 05 01 6c 02 8000 8000", []rec{{"default", "k", 1, 0, 5, wire.OpWrite}, {"default", "l", 2, 0, 0, wire.OpRead}}},
	}
	for _, tt := range tests {
		var d wire.Decoder
		got, err := decodeAll(&d, hx(t, tt.in))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Decode(%s) = %+v, %v; want %+v", tt.name, tt.in, got, err, tt.want)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	tests := []struct {
		ev   wire.Event
		want rec
	}{
		{wire.Event{Key: "item:42"}, rec{"default", "item:42", 1, 0, 0, wire.OpRead}},
		{wire.Event{App: "shop", Key: "k", Count: 5, TS: 1700000000123, Bytes: 4096, Op: wire.OpWrite},
			rec{"shop", "k", 5, 1700000000123, 4096, wire.OpWrite}},
		{wire.Event{Key: "q\"\\/\b\f\n\r\t\x00\x1f\x7f é € 😀 \u2028"}, rec{"default", "q\"\\/\b\f\n\r\t\x00\x1f\x7f é € 😀 \u2028", 1, 0, 0, 0}},
		{wire.Event{Key: "bad\xffutf8"}, rec{"default", "bad\uFFFDutf8", 1, 0, 0, 0}},
		{wire.Event{Key: "k", Count: 1<<64 - 1, TS: -3, Op: wire.OpRead}, rec{"default", "k", 1<<64 - 1, 0, 0, 0}},
	}
	for _, tt := range tests {
		b := wire.AppendJSON(nil, tt.ev)
		var d wire.Decoder
		got, err := decodeAll(&d, b)
		if err != nil || len(got) != 1 || got[0] != tt.want {
			t.Errorf("AppendJSON(%+v) = %s\ndecodes to %+v, %v\nwant %+v", tt.ev, b, got, err, tt.want)
		}
	}
	if got, want := string(wire.AppendJSON(nil, wire.Event{Key: "item:42"})), `{"key":"item:42"}`; got != want {
		t.Errorf("AppendJSON minimal = %s, want %s", got, want)
	}
	full := wire.Event{App: "shop", Key: "k", Count: 2, TS: 3, Bytes: 4, Op: wire.OpWrite}
	if got, want := string(wire.AppendJSON(nil, full)), `{"key":"k","app":"shop","count":2,"ts":3,"bytes":4,"op":"write"}`; got != want {
		t.Errorf("AppendJSON full = %s, want %s", got, want)
	}
}

type partial struct {
	App, Key                     string
	N, Writes, Bytes, WriteBytes uint64
}

func decodePartials(t *testing.T, body []byte) (wire.PartialHeader, []partial, error) {
	t.Helper()
	var got []partial
	h, err := wire.DecodePartials(body, func(app, key []byte, n, w, b, wb uint64) {
		got = append(got, partial{string(app), string(key), n, w, b, wb})
	})
	return h, got, err
}

func TestPartialsRoundTrip(t *testing.T) {
	long := strings.Repeat("L", 5000) // partials do not limit key length
	b := &wire.PartialBatch{Source: "detector-1", At: 1700000000500, Span: 300, Groups: []wire.PartialGroup{
		{App: "shop", Entries: []wire.KeyCount{{Key: "item:42", Count: 1234}, {Key: "cart:7", Count: 1}}},
		{App: "empty-after-filter", Entries: []wire.KeyCount{{Key: "", Count: 5}, {Key: "x", Count: 0}}},
		{App: "", Entries: nil},
		{App: "ads", Entries: []wire.KeyCount{{Key: "banner", Count: 99}, {Key: long, Count: 1}}},
	}}
	body := wire.AppendPartials(nil, b)
	h, got, err := decodePartials(t, body)
	want := []partial{{"shop", "item:42", 1234, 0, 0, 0}, {"shop", "cart:7", 1, 0, 0, 0}, {"ads", "banner", 99, 0, 0, 0}, {"ads", long, 1, 0, 0, 0}}
	wantH := wire.PartialHeader{Source: "detector-1", At: 1700000000500, Span: 300}
	if err != nil || !reflect.DeepEqual(h, wantH) || !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: %+v %+v %v\nwant %+v %+v nil", h, got, err, wantH, want)
	}
	h, got, err = decodePartials(t, wire.AppendPartials(nil, &wire.PartialBatch{At: -1, Span: -5}))
	if err != nil || !reflect.DeepEqual(h, (wire.PartialHeader{})) || got != nil {
		t.Errorf("empty batch: %+v %+v %v, want zero header, no entries, nil", h, got, err)
	}
	// Version 1 (no span) still decodes: magic, version 1, source "d", at 7,
	// one group "a" with one entry ("k", 2).
	v1 := []byte{0xa6, 0x01, 0x01, 'd', 0x07, 0x01, 0x01, 'a', 0x01, 0x01, 'k', 0x02}
	h, got, err = decodePartials(t, v1)
	if err != nil || !reflect.DeepEqual(h, (wire.PartialHeader{Source: "d", At: 7})) || !reflect.DeepEqual(got, []partial{{"a", "k", 2, 0, 0, 0}}) {
		t.Errorf("version 1 batch: %+v %+v %v", h, got, err)
	}
	// Version 2 (span, no end or sequence) still decodes: span 9.
	v2 := []byte{0xa6, 0x02, 0x01, 'd', 0x07, 0x09, 0x01, 0x01, 'a', 0x01, 0x01, 'k', 0x02}
	h, got, err = decodePartials(t, v2)
	if err != nil || !reflect.DeepEqual(h, (wire.PartialHeader{Source: "d", At: 7, Span: 9})) || !reflect.DeepEqual(got, []partial{{"a", "k", 2, 0, 0, 0}}) {
		t.Errorf("version 2 batch: %+v %+v %v", h, got, err)
	}
	// Version 3 (end and sequence, counts only) still decodes, as reads:
	// end 5, sequence 6.
	v3 := []byte{0xa6, 0x03, 0x01, 'd', 0x07, 0x09, 0x05, 0x06, 0x01, 0x01, 'a', 0x01, 0x01, 'k', 0x02}
	h, got, err = decodePartials(t, v3)
	if err != nil || !reflect.DeepEqual(h, (wire.PartialHeader{Source: "d", At: 7, Span: 9, End: 5, Seq: 6})) || !reflect.DeepEqual(got, []partial{{"a", "k", 2, 0, 0, 0}}) {
		t.Errorf("version 3 batch: %+v %+v %v", h, got, err)
	}
	// Version 4 (writes and bytes, no weights) still decodes: a read of
	// 2 (2<<1), then a key with writes 1, bytes 8, write bytes 4.
	v4 := []byte{0xa6, 0x04, 0x01, 'd', 0x07, 0x09, 0x05, 0x06, 0x01, 0x01, 'a', 0x02, 0x01, 'k', 0x04, 0x01, 'w', 0x05, 0x01, 0x08, 0x04}
	h, got, err = decodePartials(t, v4)
	if err != nil || !reflect.DeepEqual(h, wire.PartialHeader{Source: "d", At: 7, Span: 9, End: 5, Seq: 6}) ||
		!reflect.DeepEqual(got, []partial{{"a", "k", 2, 0, 0, 0}, {"a", "w", 2, 1, 8, 4}}) {
		t.Errorf("version 4 batch: %+v %+v %v", h, got, err)
	}
	h, _, err = decodePartials(t, wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 7, Span: 9, End: 5, Seq: 1 << 40}))
	if want := (wire.PartialHeader{Source: "d", At: 7, Span: 9, End: 5, Seq: 1 << 40}); err != nil || !reflect.DeepEqual(h, want) {
		t.Errorf("version 5 header without weights: got %+v %v, want %+v", h, err, want)
	}
	h, _, err = decodePartials(t, wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 7, Span: 900, End: 1000, Seq: 3,
		Step: 100, Weights: []uint64{200, 0, 0, 0, 0, 0, 0, 0, 200, 1 << 40}}))
	if want := (wire.PartialHeader{Source: "d", At: 7, Span: 900, End: 1000, Seq: 3,
		Step: 100, Weights: []uint64{200, 0, 0, 0, 0, 0, 0, 0, 200, 1 << 40}}); err != nil || !reflect.DeepEqual(h, want) {
		t.Errorf("version 5 header with weights: got %+v %v, want %+v", h, err, want)
	}
	// Weights without a step are not written; nor past MaxWeights.
	h, _, err = decodePartials(t, wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", Weights: []uint64{1}}))
	if err != nil || !reflect.DeepEqual(h, wire.PartialHeader{Source: "d"}) {
		t.Errorf("weights without a step: got %+v %v", h, err)
	}
	h, _, err = decodePartials(t, wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", Step: 1, Weights: make([]uint64, wire.MaxWeights+5)}))
	if err != nil || h.Step != 1 || len(h.Weights) != wire.MaxWeights {
		t.Errorf("too many weights: got step %d, %d weights, %v; want 1, %d, nil", h.Step, len(h.Weights), err, wire.MaxWeights)
	}
}

// TestPartialsWritesAndBytes round-trips version 4's writes and bytes, and
// checks what the encoder clamps and what a read-only entry costs.
func TestPartialsWritesAndBytes(t *testing.T) {
	tests := []struct {
		name string
		in   wire.KeyCount
		want partial
	}{
		{"reads only", wire.KeyCount{Key: "k", Count: 7}, partial{"a", "k", 7, 0, 0, 0}},
		{"reads with bytes", wire.KeyCount{Key: "k", Count: 7, Bytes: 7 << 20}, partial{"a", "k", 7, 0, 7 << 20, 0}},
		{"writes only", wire.KeyCount{Key: "k", Count: 3, Writes: 3}, partial{"a", "k", 3, 3, 0, 0}},
		{"reads and writes with bytes", wire.KeyCount{Key: "k", Count: 10, Writes: 4, Bytes: 1000, WriteBytes: 300},
			partial{"a", "k", 10, 4, 1000, 300}},
		{"largest values", wire.KeyCount{Key: "k", Count: math.MaxInt64 - 1, Writes: math.MaxInt64, Bytes: math.MaxUint64, WriteBytes: math.MaxUint64},
			partial{"a", "k", math.MaxInt64 - 1, math.MaxInt64 - 1, math.MaxUint64, math.MaxUint64}},
		{"2^63-1 reads as saturated", wire.KeyCount{Key: "k", Count: math.MaxInt64, Writes: 3},
			partial{"a", "k", math.MaxUint64, 3, 0, 0}},
		{"count clamped to 2^63-1, read as saturated", wire.KeyCount{Key: "k", Count: math.MaxUint64, Writes: math.MaxUint64},
			partial{"a", "k", math.MaxUint64, math.MaxInt64, 0, 0}},
		{"writes clamped to the count", wire.KeyCount{Key: "k", Count: 2, Writes: 5}, partial{"a", "k", 2, 2, 0, 0}},
		{"write bytes clamped to the bytes", wire.KeyCount{Key: "k", Count: 2, Writes: 1, Bytes: 10, WriteBytes: 11},
			partial{"a", "k", 2, 1, 10, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := wire.AppendPartials(nil, &wire.PartialBatch{Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{tt.in}}}})
			_, got, err := decodePartials(t, body)
			if err != nil || len(got) != 1 || got[0] != tt.want {
				t.Errorf("AppendPartials(%+v) decodes to %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
	// A read-only entry without bytes costs what it cost in version 3 for
	// counts below 64 (count<<1 still fits one varint byte) and one byte
	// more at most otherwise; a batch without weights costs one byte more
	// than in version 4 (its step, 0).
	for _, c := range []uint64{1, 63, 64, 127, 8191, 8192, 1 << 40} {
		v5 := len(wire.AppendPartials(nil, &wire.PartialBatch{Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: c}}}}}))
		v3 := 13 + uvarintLen(c) // magic, version, 5 header varints, group count, app (2), entry count, key (2)
		if extra := v5 - 1 - v3; extra < 0 || extra > 1 || c < 64 && extra != 0 {
			t.Errorf("count %d: version 5 body %d bytes, version 3 %d", c, v5, v3)
		}
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func TestDecodePartialsReasons(t *testing.T) {
	tests := []struct {
		name string
		in   string // hex
		want wire.Reason
		off  int
	}{
		{"empty", "", wire.ReasonEmpty, 0},
		{"access batch", "a5 01 00 00 00", wire.ReasonBadMagic, 0},
		{"json", "7b7d", wire.ReasonBadMagic, 0},
		{"unknown version", "a6 0a 00 00 00", wire.ReasonUnknownVersion, 1},
		{"v5 weights past the end", "a6 05 00 00 00 00 00 64 05 01", wire.ReasonTruncated, 8},
		{"v5 too many weights", "a6 05 00 00 00 00 00 64 81 08" + strings.Repeat(" 00", wire.MaxWeights+2), wire.ReasonBadValue, 10},
		{"version 0", "a6 00 00 00 00", wire.ReasonUnknownVersion, 1},
		{"v2 without span", "a6 02 00 00", wire.ReasonTruncated, 4},
		{"v2 span out of range", "a6 02 00 00 ffffffffffffffffff01 00", wire.ReasonBadValue, 4},
		{"no version", "a6", wire.ReasonTruncated, 1},
		{"source overruns", "a6 01 03 6162", wire.ReasonTruncated, 2},
		{"no time", "a6 01 01 61", wire.ReasonTruncated, 4},
		{"time out of range", "a6 01 00 ffffffffffffffff ff01 00", wire.ReasonBadValue, 3},
		{"bad varint", "a6 01 00 00 ffffffffffffffffffff01", wire.ReasonBadVarint, 4},
		{"lying group count", "a6 01 00 00 03 00 00 00 00", wire.ReasonTruncated, 4},
		{"app overruns", "a6 01 00 00 01 09 61 00", wire.ReasonTruncated, 5},
		{"lying entry count", "a6 01 00 00 01 01 61 02 01 6b 01", wire.ReasonTruncated, 7},
		{"empty key", "a6 01 00 00 01 01 61 01 00 6b 01", wire.ReasonEmptyKey, 8},
		{"key overruns", "a6 01 00 00 01 01 61 01 05 6b 01", wire.ReasonTruncated, 8},
		{"count 0", "a6 01 00 00 01 01 61 01 01 6b 00", wire.ReasonBadCount, 10},
		{"missing group", "a6 01 00 00 02 01 61 01 01 6b 01", wire.ReasonTruncated, 11},
		{"trailing data", "a6 01 00 00 01 01 61 01 01 6b 01 00", wire.ReasonTrailingData, 11},
		{"source not UTF-8", "a6 01 01 ff 00 00", wire.ReasonBadUTF8, 3},
		{"app not UTF-8", "a6 01 00 00 01 01 ff 01 01 6b 01", wire.ReasonBadUTF8, 6},
		{"key not UTF-8", "a6 01 00 00 01 01 61 01 01 fe 01", wire.ReasonBadUTF8, 8},
		// Version 4: source, at, span, end, sequence, then entries whose
		// count is shifted left by one, its low bit saying more follows.
		{"v4 count 0", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 00", wire.ReasonBadCount, 13},
		{"v4 count 0 with more", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 01 00 00 00", wire.ReasonBadCount, 13},
		{"v4 more writes than accesses", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 03 02 00 00", wire.ReasonBadValue, 14},
		{"v4 more bytes written than bytes", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 03 01 05 06", wire.ReasonBadValue, 16},
		{"v4 writes and bytes cut short", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 03 00", wire.ReasonTruncated, 15},
		{"v4 empty key", "a6 04 00 00 00 00 00 01 01 61 01 00 6b 02", wire.ReasonEmptyKey, 11},
		{"v4 key not UTF-8", "a6 04 00 00 00 00 00 01 01 61 01 01 fe 02", wire.ReasonBadUTF8, 11},
		{"v4 trailing data", "a6 04 00 00 00 00 00 01 01 61 01 01 6b 02 00", wire.ReasonTrailingData, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, got, err := decodePartials(t, hx(t, tt.in))
			r, we := reasonOf(t, err)
			if r != tt.want || we.Offset != tt.off {
				t.Fatalf("DecodePartials(%s) = %v, want %v at byte %d", tt.in, err, tt.want, tt.off)
			}
			if got != nil || !reflect.DeepEqual(h, (wire.PartialHeader{})) {
				t.Errorf("on error: delivered %+v, header %+v; want nothing", got, h)
			}
		})
	}
}

func TestDecodeAllocs(t *testing.T) {
	entries := make([]wire.KeyCount, 100)
	for i := range entries {
		entries[i] = wire.KeyCount{Key: "item:" + strings.Repeat("x", i%20), Count: uint64(i + 1)}
	}
	batch := wire.AppendBatch(nil, "shop", 1700000000000, entries)
	accesses := make([]wire.Access, len(entries))
	for i, e := range entries {
		accesses[i] = wire.Access{Key: e.Key, Count: e.Count, Bytes: uint64(i) << 20, Op: wire.Op(i % 2)}
	}
	batch2 := wire.AppendAccesses(nil, "shop", 1700000000000, accesses)
	partials := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d1", At: 1, Groups: []wire.PartialGroup{{App: "shop", Entries: entries}}})
	plain := []byte(`{"key":"item:42","app":"shop","count":3,"ts":1700000000000,"bytes":100,"op":"write","extra":[1,{"a":"b"}]}`)
	escaped := []byte(`{"key":"item:\u00e9\"42\"","app":"sh\u006fp","op":"wr\u0069te"}`)
	ndjson := []byte(strings.Repeat(string(plain)+"\n", 20))
	var d wire.Decoder
	n := 0
	fn := func(e *wire.Entry) { n++ }
	for name, in := range map[string][]byte{"binary": batch, "binary v2": batch2, "json": plain, "json with escapes": escaped, "ndjson": ndjson} {
		if err := d.Decode(in, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a := testing.AllocsPerRun(50, func() { _ = d.Decode(in, fn) }); a != 0 {
			t.Errorf("Decode %s: %v allocs per run, want 0", name, a)
		}
	}
	buf := make([]byte, 0, 2*len(batch2))
	if a := testing.AllocsPerRun(50, func() { buf = wire.AppendAccesses(buf[:0], "shop", 1700000000000, accesses) }); a != 0 {
		t.Errorf("AppendAccesses into a large enough dst: %v allocs per run, want 0", a)
	}
	pfn := func(app, key []byte, c, w, b, wb uint64) { n++ }
	// One allocation: the returned source string.
	if a := testing.AllocsPerRun(50, func() { _, _ = wire.DecodePartials(partials, pfn) }); a > 1 {
		t.Errorf("DecodePartials: %v allocs per run, want <= 1", a)
	}
}

// TestAppendJSONText: the escaped text is what encoding/json writes inside
// the quotes (without HTML escaping), and invalid UTF-8 becomes U+FFFD.
func TestAppendJSONText(t *testing.T) {
	for _, s := range []string{"", "item:42", `a"b\c`, "tab\there\nnl\rcr", "\x00\x01\x1f\x7f", "ünï €", "<&>"} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(b.String(), "\n")
		want = want[1 : len(want)-1]
		if got := string(wire.AppendJSONText(nil, s)); got != want {
			t.Errorf("AppendJSONText(%q) = %s, want %s", s, got, want)
		}
	}
	if got := string(wire.AppendJSONText([]byte("x"), "a\xffb")); got != `xa\ufffdb` {
		t.Errorf("AppendJSONText of invalid UTF-8 = %s, want xa\\ufffdb", got)
	}
}
