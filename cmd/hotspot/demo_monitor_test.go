package main

import (
	"strings"
	"testing"
	"time"
)

func TestThousands(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.4, "0"}, {999, "999"}, {999.5, "1,000"}, {1000, "1,000"}, {93.04, "93"},
		{123456, "123,456"}, {1234567.4, "1,234,567"}, {-1234, "-1,234"}, {-0.2, "0"},
	} {
		if got := thousands(tc.v); got != tc.want {
			t.Errorf("thousands(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestTableColumns checks that every row of the live table keeps the
// header's columns, however wide its numbers grow.
func TestTableColumns(t *testing.T) {
	header := tableHeader()
	var ends []int // where each numeric column of the header ends
	for _, name := range []string{"time", "app gets/s", "L1 hit", "Redis reads/s", "source reads/s"} {
		ends = append(ends, strings.Index(header, name)+len(name))
	}
	hotAt := strings.Index(header, "hot keys")
	for _, s := range []sample{
		{at: time.Second},
		{at: 9 * time.Second, gets: 335, l1Hits: 300, redis: 35, source: 3, hot: []string{"item:42 (3000/s)"}},
		{at: 59 * time.Minute, gets: 2_500_000, l1Hits: 2_400_000, redis: 93_000, source: 12_345},
		{at: 10 * time.Minute, gets: 9_999_999_999, l1Hits: 9_999_999_999, redis: 1e9, source: 1e9, hot: []string{"a (1/s)", "b (2/s)"}},
	} {
		row := tableRow(s)
		for i, end := range ends {
			if end > len(row) || row[end-1] == ' ' || (end < len(row) && row[end] != ' ') {
				t.Errorf("column %d of %q does not end at %d, where the header's does:\n%s\n%s", i, row, end, header, row)
			}
		}
		if hot := strings.Join(s.hot, " "); len(row) < hotAt || row[hotAt:] != hot {
			t.Errorf("hot keys of %q do not start at %d:\n%s\n%s", row, hotAt, header, row)
		}
	}
}
