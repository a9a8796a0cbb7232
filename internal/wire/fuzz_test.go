package wire_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

var jsonSeeds = []string{
	`{"key":"item:42"}`,
	`{"key":"k","app":"shop","count":7,"ts":1700000000123,"bytes":512,"op":"write"}`,
	`{"key":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800"}`,
	`{"k\u0065y":"x","count":1.5}`,
	`{"key":"x","x":{"a":[1,-2.5e+3,{"b":null}],"c":"\"}"},"y":[[],{}],"z":true}`,
	`{"key":null,"key":"b","count":0,"count":3}`,
	` {"key":"a","ts":-0,"op":"READ"} `,
	`{"key":"a","count":18446744073709551616}`,
	`[{"key":"a"}]`,
	`{"key":"a"`,
	"{\"key\":\"\xff\"}",
	`{"Key":"a","KEY":"b"}`,
}

// refJSON is the reference semantics of one JSON object, built on
// encoding/json: it returns the entry and Reason that Decode must produce
// for a line that encoding/json accepts.
func refJSON(t *testing.T, in []byte, maxKey int) (rec, wire.Reason) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("json.Valid accepted %q but Decode failed: %v", in, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return rec{}, wire.ReasonWrongType
	}
	e := rec{App: "default", Count: 1}
	switch k, ok := m["key"].(string); {
	case m["key"] == nil:
		return rec{}, wire.ReasonMissingKey
	case !ok:
		return rec{}, wire.ReasonWrongType
	case len(k) > maxKey:
		return rec{}, wire.ReasonKeyTooLong
	case k == "":
		return rec{}, wire.ReasonEmptyKey
	default:
		e.Key = k
	}
	if a := m["app"]; a != nil {
		s, ok := a.(string)
		switch {
		case !ok:
			return rec{}, wire.ReasonWrongType
		case len(s) > maxKey:
			return rec{}, wire.ReasonAppTooLong
		case s != "":
			e.App = s
		}
	}
	if c := m["count"]; c != nil {
		n, ok := c.(json.Number)
		if !ok {
			return rec{}, wire.ReasonWrongType
		}
		v, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || v == 0 {
			return rec{}, wire.ReasonBadCount
		}
		e.Count = v
	}
	if c := m["ts"]; c != nil {
		n, ok := c.(json.Number)
		if !ok {
			return rec{}, wire.ReasonWrongType
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 {
			return rec{}, wire.ReasonBadValue
		}
		e.TS = v
	}
	if c := m["bytes"]; c != nil {
		n, ok := c.(json.Number)
		if !ok {
			return rec{}, wire.ReasonWrongType
		}
		v, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return rec{}, wire.ReasonBadValue
		}
		e.Bytes = v
	}
	if c := m["op"]; c != nil {
		s, ok := c.(string)
		switch {
		case !ok:
			return rec{}, wire.ReasonWrongType
		case s == "write":
			e.Op = wire.OpWrite
		case s != "read":
			return rec{}, wire.ReasonBadValue
		}
	}
	return e, 0
}

func isSyntax(r wire.Reason) bool {
	return r == wire.ReasonNotJSON || r == wire.ReasonTruncated || r == wire.ReasonTrailingData
}

// FuzzDecodeJSON cross-checks the JSON scanner against encoding/json on
// single-line records: same verdict on syntax, and on what both accept, the
// same reason or the same entry.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		trimmed := bytes.Trim(in, " \t\r")
		if bytes.IndexByte(in, '\n') >= 0 || len(trimmed) == 0 || in[0] >= 0x80 || in[0] < 0x20 && !isJSONSpace(in[0]) {
			return // not one JSON line: FuzzDecode covers it
		}
		for _, maxKey := range []int{0, 3} {
			d := wire.Decoder{MaxKeyLen: maxKey}
			if maxKey == 0 {
				maxKey = wire.DefaultMaxKeyLen
			}
			got, err := decodeAll(&d, in)
			r, _ := reasonOf(t, err)
			switch {
			case !json.Valid(in):
				if !isSyntax(r) {
					t.Fatalf("encoding/json rejects %q; Decode: %+v, %v; want a syntax reason", in, got, err)
				}
				continue
			case !utf8.Valid(in):
				if r != wire.ReasonNotJSON {
					t.Fatalf("invalid UTF-8 in %q: Decode: %+v, %v; want not_json", in, got, err)
				}
				continue
			}
			want, wantR := refJSON(t, in, maxKey)
			if r != wantR {
				t.Fatalf("Decode(%q) MaxKeyLen %d: reason %v (%v), want %v", in, maxKey, r, err, wantR)
			}
			if r == 0 && (len(got) != 1 || got[0] != want) {
				t.Fatalf("Decode(%q):\n got %+v\nwant %+v", in, got, want)
			}
		}
	})
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// FuzzDecode feeds Decode arbitrary record values and checks its contract.
func FuzzDecode(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Join(jsonSeeds, "\n")))
	f.Add(wire.AppendBatch(nil, "shop", 1700000000000, []wire.KeyCount{{Key: "item:42", Count: 3}, {Key: "cart:7", Count: 1}}))
	f.Add(wire.AppendBatch(nil, "", 0, nil))
	f.Add([]byte{0xa5, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01})
	f.Add(wire.AppendAccesses(nil, "shop", 1700000000000, []wire.Access{{"item:42", 3, 12288, wire.OpRead}, {"item:42", 1, 4096, wire.OpWrite}}))
	f.Add(wire.AppendAccesses(nil, "", 0, nil))
	f.Add([]byte{0xa5, 0x02, 0x00, 0x00, 0x01, 0x01, 'k', 0x01, 0x81, 0x00, 0x80, 0x00})
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 1}}}}}))
	f.Add(wire.AppendAccessesFrom(nil, "shop", "pod-7", 1700000000000, []wire.Access{{"item:42", 3, 12288, wire.OpRead}}))
	f.Add(wire.AppendEffects(nil, "shop", "pod-7", 1700000000000, 5000, []wire.Effect{{Key: "item:42", EffectCounts: wire.EffectCounts{L1Hits: 900, L2Reads: 90, SourceLoads: 1, Limited: 10}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, maxKey := range []int{0, 3} {
			limit := maxKey
			if limit == 0 {
				limit = wire.DefaultMaxKeyLen
			}
			invalid := 0
			d := wire.Decoder{MaxKeyLen: maxKey, OnInvalid: func(e *wire.Error) {
				invalid++
				if e.Reason == 0 || e.Reason.String() == "" || e.Skipped != 1 {
					t.Fatalf("OnInvalid got %+v", e)
				}
			}}
			got, err := decodeAll(&d, in)
			for _, e := range got {
				if len(e.Key) == 0 || len(e.Key) > limit || len(e.App) == 0 || len(e.App) > limit && e.App != "default" || e.Count == 0 || e.TS < 0 ||
					!utf8.ValidString(e.Key) || !utf8.ValidString(e.App) {
					t.Fatalf("Decode(%q) delivered invalid entry %+v", in, e)
				}
			}
			r, we := reasonOf(t, err)
			if we != nil {
				if r == 0 || r.String() == "" || strings.HasPrefix(r.String(), "reason(") {
					t.Fatalf("unknown reason %d", r)
				}
				if we.Offset < 0 || we.Offset > len(in) || we.Skipped < 1 || we.Skipped != invalid {
					t.Fatalf("Decode(%q): error %+v with %d OnInvalid calls", in, we, invalid)
				}
			} else if invalid != 0 {
				t.Fatalf("Decode(%q): nil error after %d OnInvalid calls", in, invalid)
			}
			if len(in) > 0 && in[0] == 0xa5 {
				if err != nil && len(got) != 0 {
					t.Fatalf("binary batch %q: error %v after delivering %d entries", in, err, len(got))
				}
				if err == nil && maxKey == 0 {
					checkBatchRoundTrip(t, in, got)
				}
				continue
			}
			if len(in) == 0 || in[0] >= 0x80 || in[0] < 0x20 && !isJSONSpace(in[0]) {
				continue
			}
			lines := 0
			for _, l := range bytes.Split(in, []byte("\n")) {
				if len(bytes.Trim(l, " \t\r")) > 0 {
					lines++
				}
			}
			skipped := 0
			if we != nil {
				skipped = we.Skipped
			}
			if lines == 0 && r != wire.ReasonEmpty || lines > 0 && len(got)+skipped != lines {
				t.Fatalf("Decode(%q): %d lines, %d delivered, %d skipped (err %v)", in, lines, len(got), skipped, err)
			}
		}
	})
}

// checkBatchRoundTrip re-encodes the entries of an accepted access batch in
// and checks that they decode the same, with the same source.
func checkBatchRoundTrip(t *testing.T, in []byte, got []rec) {
	if in[1] == 4 {
		checkEffectsRoundTrip(t, in, got)
		return
	}
	if len(got) == 0 {
		return
	}
	var src string
	var d0 wire.Decoder
	d0.Decode(in, func(e *wire.Entry) { src = string(e.Src) })
	var b []byte
	switch version := in[1]; version {
	case 1:
		kc := make([]wire.KeyCount, len(got))
		for i, e := range got {
			if e.Bytes != 0 || e.Op != wire.OpRead {
				t.Fatalf("version 1 batch delivered %+v, want reads without bytes", e)
			}
			kc[i] = wire.KeyCount{Key: e.Key, Count: e.Count}
		}
		b = wire.AppendBatch(nil, got[0].App, got[0].TS, kc)
	case 2, 3:
		as := make([]wire.Access, len(got))
		for i, e := range got {
			as[i] = wire.Access{Key: e.Key, Count: e.Count, Bytes: e.Bytes, Op: e.Op}
		}
		b = wire.AppendAccessesFrom(nil, got[0].App, src, got[0].TS, as)
		if version == 2 && src != "" {
			t.Fatalf("version 2 batch delivered source %q", src)
		}
	default:
		t.Fatalf("access batch version %d accepted", version)
	}
	var d wire.Decoder
	var again []rec
	var srcAgain string
	err := d.Decode(b, func(e *wire.Entry) { again, srcAgain = append(again, copyEntry(e)), string(e.Src) })
	if err != nil || !reflect.DeepEqual(again, got) || srcAgain != src {
		t.Fatalf("re-encoded batch decodes to %+v from %q, %v; want %+v from %q", again, srcAgain, err, got, src)
	}
}

// checkEffectsRoundTrip checks an accepted effect batch: it delivers no
// access, and its effects survive a re-encoding.
func checkEffectsRoundTrip(t *testing.T, in []byte, got []rec) {
	if len(got) != 0 {
		t.Fatalf("effect batch %q delivered accesses %+v", in, got)
	}
	effects, err := decodeEffects(in)
	if err != nil {
		t.Fatalf("effect batch %q accepted, then refused with OnEffect: %v", in, err)
	}
	if len(effects) == 0 {
		return
	}
	var es []wire.Effect
	for _, e := range effects {
		if e.Key == "" || e.L1Hits|e.L2Reads|e.SourceLoads|e.Limited == 0 {
			return // valid on the wire, left out by the encoder
		}
		es = append(es, wire.Effect{Key: e.Key, EffectCounts: e.EffectCounts})
	}
	b := wire.AppendEffects(nil, effects[0].App, effects[0].Src, effects[0].End, effects[0].Period, es)
	again, err := decodeEffects(b)
	if err != nil || !reflect.DeepEqual(again, effects) {
		t.Fatalf("re-encoded effects decode to %+v, %v; want %+v", again, err, effects)
	}
}

// FuzzDecodePartials feeds DecodePartials arbitrary bodies: no panic, nothing
// delivered on error, and what it accepts survives a re-encoding.
func FuzzDecodePartials(f *testing.F) {
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{Source: "detector-1", At: 1700000000500, Groups: []wire.PartialGroup{
		{App: "shop", Entries: []wire.KeyCount{{Key: "item:42", Count: 1234}, {Key: "cart:7", Count: 1}}},
		{App: "ads", Entries: []wire.KeyCount{{Key: "banner", Count: math.MaxUint64}}},
	}}))
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{}))
	f.Add([]byte{0xa6, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00})
	f.Add([]byte{0xa6, 0x02})
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 5, Span: 400, Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 3}}}}}))
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 5, Span: 400, End: 9, Seq: 3, Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{
		{Key: "r", Count: 3, Bytes: 4096}, {Key: "w", Count: 5, Writes: 2, Bytes: 1 << 40, WriteBytes: 1 << 39}}}}}))
	f.Add([]byte{0xa6, 0x03, 0x01, 'd', 0x07, 0x09, 0x05, 0x06, 0x01, 0x01, 'a', 0x01, 0x01, 'k', 0x02})
	f.Add(wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 5, End: 5, Seq: 1,
		Groups:  []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 3}}}},
		Sources: []wire.PartialSources{{App: "a", Key: "k", Total: 4, Top: []wire.SourceCount{{"pod-1", 2}, {"pod-2", 1}}, Distinct: []byte{1, 2, 3}}},
		Effects: []wire.PartialEffect{{App: "a", Key: "k", EffectCounts: wire.EffectCounts{L1Hits: 7, Limited: 1}}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		type group struct {
			app     string
			entries []wire.KeyCount
		}
		var groups []group
		var flat []partial
		h, err := wire.DecodePartials(in, func(app, key []byte, c, w, b, wb uint64) {
			if len(key) == 0 || c == 0 || w > c || wb > b || !utf8.Valid(key) || !utf8.Valid(app) {
				t.Fatalf("DecodePartials(%q) delivered app %q key %q count %d writes %d bytes %d write bytes %d", in, app, key, c, w, b, wb)
			}
			if len(groups) == 0 || groups[len(groups)-1].app != string(app) {
				groups = append(groups, group{app: string(app)})
			}
			g := &groups[len(groups)-1]
			g.entries = append(g.entries, wire.KeyCount{Key: string(key), Count: c, Writes: w, Bytes: b, WriteBytes: wb})
			// Re-encoded as version 5, a count of 2^63-1 or more (an older
			// version's) is written as saturated and reads back as 2^64-1
			// (the writes of those are 0).
			if c >= math.MaxInt64 {
				c = math.MaxUint64
			}
			flat = append(flat, partial{string(app), string(key), c, w, b, wb})
		})
		if err != nil {
			reasonOf(t, err)
			if flat != nil || !reflect.DeepEqual(h, (wire.PartialHeader{})) {
				t.Fatalf("DecodePartials(%q) failed with %v after delivering %+v", in, err, flat)
			}
			return
		}
		b := &wire.PartialBatch{Source: h.Source, At: h.At, Span: h.Span, End: h.End, Seq: h.Seq, Step: h.Step, Weights: h.Weights}
		for _, g := range groups {
			b.Groups = append(b.Groups, wire.PartialGroup{App: g.app, Entries: g.entries})
		}
		b.Sources, b.Effects = decodeExtras(t, in)
		var again []partial
		h2, err := wire.DecodePartials(wire.AppendPartials(nil, b), func(app, key []byte, c, w, by, wb uint64) {
			again = append(again, partial{string(app), string(key), c, w, by, wb})
		})
		if s, e := decodeExtras(t, wire.AppendPartials(nil, b)); !reflect.DeepEqual(s, b.Sources) || !reflect.DeepEqual(e, b.Effects) {
			t.Fatalf("re-encoded extras decode to %+v %+v, want %+v %+v", s, e, b.Sources, b.Effects)
		}
		if err != nil || !reflect.DeepEqual(h2, h) || !reflect.DeepEqual(again, flat) {
			t.Fatalf("re-encoded partials decode to %+v %+v %v; want %+v %+v", h2, again, err, h, flat)
		}
	})
}

// decodeExtras returns the sources and effects of an accepted partial-count
// batch, copied.
func decodeExtras(t *testing.T, in []byte) ([]wire.PartialSources, []wire.PartialEffect) {
	var ss []wire.PartialSources
	var es []wire.PartialEffect
	_, err := wire.DecodePartialsWith(in, func(_, _ []byte, _, _, _, _ uint64) {}, wire.PartialExtras{
		Sources: func(app, key []byte, total uint64, top []wire.SourceCount, distinct []byte) {
			if len(key) == 0 || len(top) > wire.MaxTopSources || len(distinct) > wire.MaxSketchLen {
				t.Fatalf("sources of %q: %d, sketch of %d bytes", key, len(top), len(distinct))
			}
			ss = append(ss, wire.PartialSources{App: string(app), Key: string(key), Total: total, Top: slices.Clone(top), Distinct: bytes.Clone(distinct)})
		},
		Effect: func(app, key []byte, c wire.EffectCounts) {
			es = append(es, wire.PartialEffect{App: string(app), Key: string(key), EffectCounts: c})
		},
	})
	if err != nil {
		t.Fatalf("DecodePartialsWith refused what DecodePartials took: %v", err)
	}
	return ss, es
}
