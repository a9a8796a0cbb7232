package wire_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []rec
	}{
		{"minimal", `{"key":"item:42"}`, []rec{{App: "default", Key: "item:42", Count: 1}}},
		{"all fields", `{"key":"k","app":"shop","count":7,"ts":1700000000123,"bytes":512,"op":"write"}`,
			[]rec{{App: "shop", Key: "k", Count: 7, TS: 1700000000123, Bytes: 512, Op: wire.OpWrite}}},
		{"op read", `{"op":"read","key":"k"}`, []rec{{App: "default", Key: "k", Count: 1}}},
		{"whitespace", " \t{ \"key\" : \"k\" ,\r\"count\" :\t2 } \r\n", []rec{{App: "default", Key: "k", Count: 2}}},
		{"nulls mean absent", `{"key":"k","app":null,"count":null,"ts":null,"bytes":null,"op":null}`,
			[]rec{{App: "default", Key: "k", Count: 1}}},
		{"empty app means default", `{"key":"k","app":""}`, []rec{{App: "default", Key: "k", Count: 1}}},
		{"last duplicate wins", `{"key":1,"count":0,"key":"b","count":3}`, []rec{{App: "default", Key: "b", Count: 3}}},
		{"unknown fields skipped", `{"x":{"a":[1,-2.5e+3,{"b":null}],"c":"\"}"},"key":"k","y":[[],{}],"z":true,"w":false}`,
			[]rec{{App: "default", Key: "k", Count: 1}}},
		{"escapes", `{"key":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac\ud83d\ude00"}`,
			[]rec{{App: "default", Key: "a\"b\\c/d\b\f\n\r\t\u00e9\u20ac\U0001F600", Count: 1}}},
		{"lone surrogates become U+FFFD", `{"key":"\ud800x\udc00\ud800\u0041"}`,
			[]rec{{App: "default", Key: "\uFFFDx\uFFFD\uFFFDA", Count: 1}}},
		{"escaped field name", `{"k\u0065y":"k","\u0061pp":"a"}`, []rec{{App: "a", Key: "k", Count: 1}}},
		{"field names are case-sensitive", `{"key":"k","Count":5,"KEY":"x"}`, []rec{{App: "default", Key: "k", Count: 1}}},
		{"utf-8 key", `{"key":"caf\u00e9 日本"}`, []rec{{App: "default", Key: "café 日本", Count: 1}}},
		{"max count", `{"key":"k","count":18446744073709551615}`, []rec{{App: "default", Key: "k", Count: 1<<64 - 1}}},
		{"ts -0 is 0", `{"key":"k","ts":-0}`, []rec{{App: "default", Key: "k", Count: 1}}},
		{"ndjson", "{\"key\":\"a\"}\n\n{\"key\":\"b\",\"count\":2}\r\n  \n{\"key\":\"c\"}",
			[]rec{{App: "default", Key: "a", Count: 1}, {App: "default", Key: "b", Count: 2}, {App: "default", Key: "c", Count: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d wire.Decoder
			got, err := decodeAll(&d, []byte(tt.in))
			if err != nil {
				t.Fatalf("Decode(%q) error %v, want nil", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodeReasons(t *testing.T) {
	long := strings.Repeat("x", wire.DefaultMaxKeyLen+1)
	exact := strings.Repeat("x", wire.DefaultMaxKeyLen)
	tests := []struct {
		name   string
		in     string // hex when binary is set
		binary bool
		maxKey int
		want   wire.Reason
		off    int // want Offset; -1 skips the check
	}{
		// Whole-record reasons.
		{"empty record", "", false, 0, wire.ReasonEmpty, 0},
		{"whitespace only", " \r\n\t\n", false, 0, wire.ReasonEmpty, 0},
		{"bad magic high byte", "\xff{}", false, 0, wire.ReasonBadMagic, 0},
		{"bad magic control byte", "\x01", false, 0, wire.ReasonBadMagic, 0},
		{"partial batch is not a record", "a6 01 00 00 00", true, 0, wire.ReasonBadMagic, 0},

		// JSON syntax.
		{"not json text", "GET /item/42 HTTP/1.1", false, 0, wire.ReasonNotJSON, 0},
		{"unquoted name", `{key:"a"}`, false, 0, wire.ReasonNotJSON, 1},
		{"trailing comma", `{"key":"a",}`, false, 0, wire.ReasonNotJSON, 11},
		{"missing colon", `{"key" "a"}`, false, 0, wire.ReasonNotJSON, 7},
		{"leading zero", `{"key":"a","x":01}`, false, 0, wire.ReasonNotJSON, 16},
		{"bad literal", `{"key":"a","x":nul}`, false, 0, wire.ReasonNotJSON, 18},
		{"control char in string", "{\"key\":\"a\x01\"}", false, 0, wire.ReasonNotJSON, 9},
		{"invalid utf-8", "{\"key\":\"a\xffb\"}", false, 0, wire.ReasonNotJSON, 9},
		{"invalid escape", `{"key":"a\qb"}`, false, 0, wire.ReasonNotJSON, 9},
		{"bad hex escape", `{"key":"\u12g4"}`, false, 0, wire.ReasonNotJSON, 12},
		{"bad nested value", `{"key":"a","x":[1,]}`, false, 0, wire.ReasonNotJSON, 18},
		{"mismatched bracket", `{"key":"a","x":[1}`, false, 0, wire.ReasonNotJSON, 17},
		{"too deep", `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"key":"a"}`, false, 0, wire.ReasonNotJSON, 5 + 9999},
		{"bad number exponent", `{"key":"a","count":1e}`, false, 0, wire.ReasonNotJSON, 21},
		{"truncated object", `{"key":"a"`, false, 0, wire.ReasonTruncated, 10},
		{"truncated string", `{"key":"ab`, false, 0, wire.ReasonTruncated, 10},
		{"truncated escape", `{"key":"\u12`, false, 0, wire.ReasonTruncated, 12},
		{"truncated utf-8", "{\"key\":\"\xe2\x82", false, 0, wire.ReasonTruncated, 8},
		{"truncated number", `{"key":"a","count":-`, false, 0, wire.ReasonTruncated, 20},
		{"truncated nested", `{"key":"a","x":[{"y":`, false, 0, wire.ReasonTruncated, 21},
		{"trailing garbage", `{"key":"a"} x`, false, 0, wire.ReasonTrailingData, 12},
		{"two objects on a line", `{"key":"a"}{"key":"b"}`, false, 0, wire.ReasonTrailingData, 11},

		// JSON fields.
		{"line is an array", `[{"key":"a"}]`, false, 0, wire.ReasonWrongType, 0},
		{"line is a string", `"item:42"`, false, 0, wire.ReasonWrongType, 0},
		{"line is null", `null`, false, 0, wire.ReasonWrongType, 0},
		{"key is a number", `{"key":42}`, false, 0, wire.ReasonWrongType, 7},
		{"key is an object", `{"key":{"a":1}}`, false, 0, wire.ReasonWrongType, 7},
		{"app is a number", `{"key":"a","app":1}`, false, 0, wire.ReasonWrongType, 17},
		{"count is a string", `{"key":"a","count":"3"}`, false, 0, wire.ReasonWrongType, 19},
		{"ts is a bool", `{"key":"a","ts":true}`, false, 0, wire.ReasonWrongType, 16},
		{"bytes is an array", `{"key":"a","bytes":[]}`, false, 0, wire.ReasonWrongType, 19},
		{"op is a number", `{"key":"a","op":1}`, false, 0, wire.ReasonWrongType, 16},
		{"no key", `{"app":"shop"}`, false, 0, wire.ReasonMissingKey, 0},
		{"empty object", ` {}`, false, 0, wire.ReasonMissingKey, 1},
		{"null key", `{"key":null}`, false, 0, wire.ReasonMissingKey, 0},
		{"empty key", `{"key":""}`, false, 0, wire.ReasonEmptyKey, 7},
		{"key one byte too long", `{"key":"` + long + `"}`, false, 0, wire.ReasonKeyTooLong, 7},
		{"key too long after unescaping", `{"key":"` + exact[1:] + `\u00e9"}`, false, 0, wire.ReasonKeyTooLong, 7},
		{"key over MaxKeyLen", `{"key":"abcde"}`, false, 4, wire.ReasonKeyTooLong, 7},
		{"app too long", `{"key":"a","app":"` + long + `"}`, false, 0, wire.ReasonAppTooLong, 17},
		{"count 0", `{"key":"a","count":0}`, false, 0, wire.ReasonBadCount, 19},
		{"count negative", `{"key":"a","count":-1}`, false, 0, wire.ReasonBadCount, 19},
		{"count -0", `{"key":"a","count":-0}`, false, 0, wire.ReasonBadCount, 19},
		{"count fraction", `{"key":"a","count":1.5}`, false, 0, wire.ReasonBadCount, 19},
		{"count 1.0", `{"key":"a","count":1.0}`, false, 0, wire.ReasonBadCount, 19},
		{"count exponent", `{"key":"a","count":1e2}`, false, 0, wire.ReasonBadCount, 19},
		{"count overflow", `{"key":"a","count":18446744073709551616}`, false, 0, wire.ReasonBadCount, 19},
		{"ts negative", `{"key":"a","ts":-1}`, false, 0, wire.ReasonBadValue, 16},
		{"ts fraction", `{"key":"a","ts":1.5}`, false, 0, wire.ReasonBadValue, 16},
		{"ts overflow", `{"key":"a","ts":9223372036854775808}`, false, 0, wire.ReasonBadValue, 16},
		{"bytes negative", `{"key":"a","bytes":-1}`, false, 0, wire.ReasonBadValue, 19},
		{"op unknown", `{"key":"a","op":"delete"}`, false, 0, wire.ReasonBadValue, 16},
		{"op wrong case", `{"key":"a","op":"READ"}`, false, 0, wire.ReasonBadValue, 16},
		{"syntax beats fields", `{"key":"","count":0,}`, false, 0, wire.ReasonNotJSON, 20},
		{"key checked before count", `{"count":0,"key":""}`, false, 0, wire.ReasonEmptyKey, 17},

		// Binary batch: a5 01 | app | start | n | entries.
		{"unknown version", "a5 05 00 00 00", true, 0, wire.ReasonUnknownVersion, 1},
		{"version 0", "a5 00 00 00 00", true, 0, wire.ReasonUnknownVersion, 1},
		{"no version", "a5", true, 0, wire.ReasonTruncated, 1},
		{"app overruns", "a5 01 05 73686f70", true, 0, wire.ReasonTruncated, 2},
		{"app too long", "a5 01 8108", true, 0, wire.ReasonAppTooLong, 2},
		{"no start time", "a5 01 00", true, 0, wire.ReasonTruncated, 3},
		{"start time out of range", "a5 01 00 ffffffffffffffff ff01 00", true, 0, wire.ReasonBadValue, 3},
		{"varint too long", "a5 01 00 ffffffffffffffffffff01", true, 0, wire.ReasonBadVarint, 3},
		{"varint overflows", "a5 01 00 ffffffffffffffffff02", true, 0, wire.ReasonBadVarint, 3},
		{"lying entry count", "a5 01 00 00 02 01 61 01", true, 0, wire.ReasonTruncated, 4},
		{"huge entry count", "a5 01 00 00 ffffffffffffffffff01 01 61 01", true, 0, wire.ReasonTruncated, 4},
		{"binary empty key", "a5 01 00 00 01 00 01 01", true, 0, wire.ReasonEmptyKey, 5},
		{"binary key too long", "a5 01 00 00 01 8108 61 01", true, 0, wire.ReasonKeyTooLong, 5},
		{"binary key over MaxKeyLen", "a5 01 00 00 01 03 616263 01", true, 2, wire.ReasonKeyTooLong, 5},
		{"key overruns", "a5 01 00 00 01 05 6162 01", true, 0, wire.ReasonTruncated, 5},
		{"binary count 0", "a5 01 00 00 01 01 61 00", true, 0, wire.ReasonBadCount, 7},
		{"missing count", "a5 01 00 00 01 02 6162", true, 0, wire.ReasonTruncated, 8},
		{"trailing byte", "a5 01 00 00 01 01 61 01 00", true, 0, wire.ReasonTrailingData, 8},
		// item:\xff and item:\xfe must not both publish as item:\ufffd.
		{"binary key not UTF-8", "a5 01 00 00 01 06 6974656d3aff 01", true, 0, wire.ReasonBadUTF8, 5},
		{"binary key truncated rune", "a5 01 00 00 01 02 61c3 01", true, 0, wire.ReasonBadUTF8, 5},
		{"binary app not UTF-8", "a5 01 01 fe 00 01 01 61 01", true, 0, wire.ReasonBadUTF8, 3},
		// Version 2: a5 02 | app | start | n | entries of key, count, op, bytes.
		{"v2 lying entry count", "a5 02 00 00 02 01 61 01 00 00", true, 0, wire.ReasonTruncated, 4},
		{"v2 missing op", "a5 02 00 00 01 03 616263 01", true, 0, wire.ReasonTruncated, 10},
		{"v2 missing bytes", "a5 02 00 00 01 02 6162 01 00", true, 0, wire.ReasonTruncated, 10},
		{"v2 op 2", "a5 02 00 00 01 01 61 01 02 00", true, 0, wire.ReasonBadValue, 8},
		{"v2 op overflows", "a5 02 00 00 01 01 61 01 ffffffffffffffffff02 00", true, 0, wire.ReasonBadVarint, 8},
		{"v2 bytes overflow", "a5 02 00 00 01 01 61 01 01 ffffffffffffffffffff01", true, 0, wire.ReasonBadVarint, 9},
		{"v2 count 0", "a5 02 00 00 01 01 61 00 00 00", true, 0, wire.ReasonBadCount, 7},
		{"v2 empty key", "a5 02 00 00 01 00 01 00 00 00", true, 0, wire.ReasonEmptyKey, 5},
		{"v2 key not UTF-8", "a5 02 00 00 01 01 ff 01 00 00", true, 0, wire.ReasonBadUTF8, 5},
		{"v2 trailing byte", "a5 02 00 00 01 01 61 01 00 00 00", true, 0, wire.ReasonTrailingData, 10},
		{"v2 bad second entry", "a5 02 00 00 02 01 61 01 00 00 01 62 01 05 00", true, 0, wire.ReasonBadValue, 13},
	}
	covered := map[wire.Reason]bool{}
	for _, tt := range tests {
		covered[tt.want] = true
	}
	for _, r := range wire.Reasons() {
		if !covered[r] {
			t.Errorf("no test case for reason %v", r)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if tt.binary {
				in = hx(t, tt.in)
			}
			var invalid []wire.Reason
			d := wire.Decoder{MaxKeyLen: tt.maxKey, OnInvalid: func(e *wire.Error) { invalid = append(invalid, e.Reason) }}
			got, err := decodeAll(&d, in)
			r, we := reasonOf(t, err)
			if r != tt.want {
				t.Fatalf("Decode(%.80q) reason %v (err %v), want %v", in, r, err, tt.want)
			}
			if tt.off >= 0 && we.Offset != tt.off {
				t.Errorf("Decode(%.80q) offset %d (err %v), want %d", in, we.Offset, err, tt.off)
			}
			if we.Skipped != 1 {
				t.Errorf("Skipped = %d, want 1", we.Skipped)
			}
			if len(got) != 0 {
				t.Errorf("delivered %+v, want nothing", got)
			}
			if !reflect.DeepEqual(invalid, []wire.Reason{tt.want}) {
				t.Errorf("OnInvalid saw %v, want [%v]", invalid, tt.want)
			}
			// Syntax verdicts on JSON agree with encoding/json (which
			// accepts invalid UTF-8 in strings; this package does not).
			if !tt.binary && r != wire.ReasonEmpty && r != wire.ReasonBadMagic && utf8.Valid(in) {
				syntax := r == wire.ReasonNotJSON || r == wire.ReasonTruncated || r == wire.ReasonTrailingData
				if json.Valid(in) == syntax {
					t.Errorf("json.Valid = %v but reason is %v", json.Valid(in), r)
				}
			}
		})
	}
}

func TestKeyAtLimits(t *testing.T) {
	for _, max := range []int{0, 1, 5, 3000, math.MaxInt} {
		limit := max
		switch max {
		case 0:
			limit = wire.DefaultMaxKeyLen
		case math.MaxInt:
			limit = 5000
		}
		d := wire.Decoder{MaxKeyLen: max}
		key := strings.Repeat("k", limit)
		ins := [][]byte{
			[]byte(`{"key":"` + key + `","app":"` + key + `"}`),
			[]byte(`{"key":"` + key[1:] + `\u006b","app":"\u006b` + key[1:] + `"}`),
		}
		if limit <= wire.DefaultMaxKeyLen { // AppendBatch drops longer keys
			ins = append(ins, wire.AppendBatch(nil, key, 0, []wire.KeyCount{{Key: key, Count: 1}}))
		}
		for _, in := range ins {
			got, err := decodeAll(&d, in)
			if err != nil || len(got) != 1 || got[0].Key != key || got[0].App != key {
				t.Errorf("MaxKeyLen %d, key and app of %d bytes: got %d entries, err %v; want 1 entry, nil", max, limit, len(got), err)
			}
		}
	}
}

func TestNDJSONBadLines(t *testing.T) {
	in := "{\"key\":\"a\"}\n" +
		"{\"key\":\"\"}\n" + // empty_key at 12
		"not json\n" + // not_json
		"{\"key\":\"b\",\"count\":2}\n" +
		"{\"key\":\"c\",\"count\":0}\n" + // bad_count
		"{\"key\":\"d\""
	var invalid []wire.Reason
	d := wire.Decoder{OnInvalid: func(e *wire.Error) { invalid = append(invalid, e.Reason) }}
	got, err := decodeAll(&d, []byte(in))
	want := []rec{{App: "default", Key: "a", Count: 1}, {App: "default", Key: "b", Count: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delivered %+v, want %+v", got, want)
	}
	r, we := reasonOf(t, err)
	if r != wire.ReasonEmptyKey || we.Offset != 19 || we.Skipped != 4 {
		t.Errorf("error %+v, want empty_key at 19 with Skipped 4", we)
	}
	wantInvalid := []wire.Reason{wire.ReasonEmptyKey, wire.ReasonNotJSON, wire.ReasonBadCount, wire.ReasonTruncated}
	if !reflect.DeepEqual(invalid, wantInvalid) {
		t.Errorf("OnInvalid saw %v, want %v", invalid, wantInvalid)
	}
	if s := err.Error(); s != `wire: empty_key at byte 19: empty key (4 bad lines)` {
		t.Errorf("Error() = %q", s)
	}
}

func TestBinaryAllOrNothing(t *testing.T) {
	good := wire.AppendBatch(nil, "shop", 5, []wire.KeyCount{{Key: "a", Count: 1}, {Key: "b", Count: 2}, {Key: "c", Count: 3}})
	for cut := range len(good) {
		var d wire.Decoder
		got, err := decodeAll(&d, good[:cut])
		if err == nil || len(got) != 0 {
			t.Fatalf("batch cut at %d/%d: got %d entries, err %v; want none and an error", cut, len(good), len(got), err)
		}
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] = 0 // last count 0
	var d wire.Decoder
	got, err := decodeAll(&d, bad)
	if r, _ := reasonOf(t, err); r != wire.ReasonBadCount || len(got) != 0 {
		t.Errorf("batch with bad last entry: got %d entries, reason %v; want 0, bad_count", len(got), r)
	}
}

func TestCallbackCannotCorruptDecoder(t *testing.T) {
	var d wire.Decoder
	in := "{\"key\":\"a\"}\n{\"key\":\"b\"}"
	var apps []string
	err := d.Decode([]byte(in), func(e *wire.Entry) {
		apps = append(apps, string(e.App))
		e.App[0] = 'X' // forbidden, but must not leak into the next entry
		e.Key = append(e.Key, "zz"...)
	})
	if err != nil || !reflect.DeepEqual(apps, []string{"default", "default"}) {
		t.Errorf("apps %v, err %v; want [default default], nil", apps, err)
	}
	if in != "{\"key\":\"a\"}\n{\"key\":\"b\"}" {
		t.Errorf("callback's append overwrote the record")
	}
}

func TestReasons(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range wire.Reasons() {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "reason(") || seen[s] {
			t.Errorf("Reason %d has label %q (bad or duplicate)", r, s)
		}
		seen[s] = true
	}
	for _, want := range []string{"not_json", "wrong_type", "bad_count", "empty_key", "key_too_long", "truncated", "unknown_version", "bad_magic", "trailing_data"} {
		if !seen[want] {
			t.Errorf("Reasons() lacks %q", want)
		}
	}
	if got := wire.Reason(0).String(); got != "reason(0)" {
		t.Errorf("Reason(0).String() = %q, want reason(0)", got)
	}
	err := &wire.Error{Reason: wire.ReasonTruncated, Offset: 7, Detail: "x", Skipped: 1}
	if got, want := err.Error(), "wire: truncated at byte 7: x"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestDepthLimitMatchesEncodingJSON(t *testing.T) {
	for _, depth := range []int{9999, 10000} { // containers inside the top object
		in := []byte(`{"key":"a","x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}")
		var d wire.Decoder
		_, err := decodeAll(&d, in)
		if (err == nil) != json.Valid(in) {
			t.Errorf("depth %d: Decode error %v, json.Valid %v", depth+1, err, json.Valid(in))
		}
	}
}
