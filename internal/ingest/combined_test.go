package ingest

import (
	"maps"
	"testing"
)

// TestParseCombined pins where parseCombined stops on a line that is not
// of format combined and what it says it expected there (Explain shows
// both), one line per way to fail, and the groups of lines that match
// (FuzzCombined checks matches and groups against combinedRE, not the
// offsets and messages).
func TestParseCombined(t *testing.T) {
	const p = `1.2.3.4 - - [x] `
	tests := []struct {
		line   string
		off    int
		want   string
		groups map[string]string // on a match; a group left out did not take part
	}{
		{"", 0, "remote_addr", nil},
		{"a", 1, "a space", nil},
		{"a\tb - -", 1, "a space", nil},
		{"a  b", 2, "the ident field", nil},
		{"a - ", 4, "remote_user", nil},
		{"a - -", 5, "a space", nil},
		{"a - - x", 6, `"[" before time_local`, nil},
		{"a - - [x", 8, `"]" after time_local`, nil},
		{"a - - [x]x", 9, `' "' before the request`, nil},
		{p + `" / HTTP/1.1" 200 0 "" ""`, 17, "the request method", nil},
		{p + `"GET" 200 0 "" ""`, 20, "a space after the method", nil},
		{p + `"GET /a" 200 0 "" ""`, 23, "a space after the request target", nil},
		{p + `"GET /a?b" 200 0 "" ""`, 25, "a space after the request target", nil},
		{p + `"GET / " 200 0 "" ""`, 23, "the request protocol", nil},
		{p + `"GET / HTTP/1.1"200 0 "" ""`, 31, `'" ' after the request`, nil},
		{p + `"GET / HTTP/1.1" 20 0 "" ""`, 33, "a three-digit status", nil},
		{p + `"GET / HTTP/1.1" 2000 0 "" ""`, 36, "a space after the status", nil},
		{p + `"GET / HTTP/1.1" 200 x "" ""`, 37, `body_bytes_sent (digits or "-")`, nil},
		{p + `"GET / HTTP/1.1" 200 0"" ""`, 38, `' "' before referer`, nil},
		{p + `"GET / HTTP/1.1" 200 0 "abc`, 43, `'"' after referer`, nil},
		{p + `"GET / HTTP/1.1" 200 0 "r"x`, 42, `' "' before user_agent`, nil},
		{p + `"GET / HTTP/1.1" 200 0 "r" "ua`, 46, `'"' after user_agent`, nil},
		{p + `"GET / HTTP/1.1" 200 0 "r" "ua\"`, 48, `'"' after user_agent`, nil},
		{p + `"GET / HTTP/1.1" 200 0 "r" "ua" x`, 47, "the end of the line after user_agent", nil},
		{`203.0.113.9 id user [14/Nov/2023:22:13:20 +0000] "GET /item/1?ref=a HTTP/1.1" 200 5321 "https://r/" "UA 1.0"`, -1, "",
			map[string]string{"remote_addr": "203.0.113.9", "remote_user": "user", "time_local": "14/Nov/2023:22:13:20 +0000",
				"method": "GET", "path": "/item/1", "query": "ref=a", "protocol": "HTTP/1.1", "status": "200", "bytes": "5321",
				"referer": "https://r/", "user_agent": "UA 1.0"}},
		{p + `"POST /a\"b\ c?q\ r HTTP/2" 404 - "a\"b" "c\\"`, -1, "",
			map[string]string{"remote_addr": "1.2.3.4", "remote_user": "-", "time_local": "x", "method": "POST",
				"path": `/a\"b\ c`, "query": `q\ r`, "protocol": "HTTP/2", "status": "404", "bytes": "-",
				"referer": `a\"b`, "user_agent": `c\\`}},
		{p + `"GET /a? HTTP/1.1" 200 0 "" ""`, -1, "",
			map[string]string{"remote_addr": "1.2.3.4", "remote_user": "-", "time_local": "x", "method": "GET", "path": "/a",
				"query": "", "protocol": "HTTP/1.1", "status": "200", "bytes": "0", "referer": "", "user_agent": ""}},
		{p + `"get / HTTP/1.0" 304 - "" "-"`, -1, "",
			map[string]string{"remote_addr": "1.2.3.4", "remote_user": "-", "time_local": "x", "method": "get", "path": "/",
				"protocol": "HTTP/1.0", "status": "304", "bytes": "-", "referer": "", "user_agent": "-"}},
	}
	for _, tt := range tests {
		var g combinedSpans
		off, want := parseCombined([]byte(tt.line), &g)
		if off != tt.off || want != tt.want {
			t.Errorf("parseCombined(%q) = %d, %q; want %d, %q", tt.line, off, want, tt.off, tt.want)
			continue
		}
		if off >= 0 {
			continue
		}
		got := map[string]string{}
		for i, name := range combinedGroups {
			if g[2*i] >= 0 {
				got[name] = tt.line[g[2*i]:g[2*i+1]]
			}
		}
		if !maps.Equal(got, tt.groups) {
			t.Errorf("parseCombined(%q) groups\n got %q\nwant %q", tt.line, got, tt.groups)
		}
	}
}
