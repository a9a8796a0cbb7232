package ingest

import (
	"strings"
	"testing"
)

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		f    timeFormat
		want int64 // 0: refused
	}{
		{"1700000000", timeUnixS, 1700000000000},
		{"1700000000.1239", timeUnixS, 1700000000123},
		{"1.7e9", timeUnixS, 1700000000000},
		{"1700000000123", timeUnixMs, 1700000000123},
		{"1700000000123.9", timeUnixMs, 1700000000123},
		{"0", timeUnixMs, 0},
		{"-5", timeUnixMs, 0},
		{"1.", timeUnixS, 0},
		{" 1", timeUnixS, 0},
		{"1e", timeUnixS, 0},
		{"1e400", timeUnixS, 0},
		{"99999999999999999999", timeUnixS, 0},
		{"9223372036854775", timeUnixS, 0},
		{"2023-11-14T22:13:20Z", timeRFC3339, 1700000000000},
		{"2023-11-14T22:13:20.123456789Z", timeRFC3339, 1700000000123},
		{"2023-11-14T23:13:20.5+01:00", timeRFC3339, 1700000000500},
		{"2023-11-14T17:13:20-05:00", timeRFC3339, 1700000000000},
		{"2024-02-29T00:00:00Z", timeRFC3339, 1709164800000},
		{"2023-02-29T00:00:00Z", timeRFC3339, 0},
		{"2023-11-14t22:13:20Z", timeRFC3339, 0},
		{"2023-11-14T22:13:20", timeRFC3339, 0},
		{"2023-11-14T24:00:00Z", timeRFC3339, 0},
		{"1969-12-31T23:59:59Z", timeRFC3339, 0},
		{"10/Oct/2000:13:55:36 -0700", timeCLF, 971211336000},
		{"10/oct/2000:20:55:36 +0000", timeCLF, 971211336000},
		{"14/Nov/2023:22:13:20 +0000", timeCLF, 1700000000000},
		{"31/Apr/2023:00:00:00 +0000", timeCLF, 0},
		{"10/Oct/2000:13:55:36 0700", timeCLF, 0},
		{"10/Oct/2000:13:55:36.5 -0700", timeCLF, 0},
		{"1/Oct/2000:13:55:36 -0700", timeCLF, 0},
	} {
		got, ok := parseTime([]byte(tc.in), tc.f)
		if !ok {
			got = 0
		}
		if got != tc.want {
			t.Errorf("parseTime(%q, %s) = %d, %v; want %d", tc.in, timeFormatNames[tc.f], got, ok, tc.want)
		}
	}
}

func TestJSONDepth(t *testing.T) {
	in := mustInput(t, `inputs: [{topic: a, format: json, fields: {key: k}}]`)
	for _, tc := range []struct {
		depth int
		want  Reason
	}{{maxDepth, 0}, {maxDepth + 1, ReasonNotJSON}} {
		// The top-level object is level 1; nest arrays below it.
		line := `{"k":"x","d":` + strings.Repeat("[", tc.depth-1) + strings.Repeat("]", tc.depth-1) + "}"
		r := decode(in, 0, line)
		if got := errReason(r.err); got != tc.want {
			t.Errorf("depth %d: %v, want reason %v", tc.depth, r.err, tc.want)
		}
	}
}
