package ingest

import (
	"regexp"
	"testing"
)

func TestMatcher(t *testing.T) {
	inputs := []string{"", "2", "200", "404", "GET", "get", "xGET", "GETx", "/api/v1", "api", "caf\xff", "café", "a\nb"}
	for _, tc := range []struct {
		pattern string
		kind    matchKind
	}{
		{`^2`, matchPrefix},
		{`^GET$`, matchEqual},
		{`api`, matchContains},
		{`^/api/`, matchPrefix},
		{`^café$`, matchEqual},
		{`(?i)^get$`, matchRegexp},
		{`^(GET|HEAD)$`, matchRegexp},
		{`^2..$`, matchRegexp},
		{`^$`, matchRegexp},
		{`(?m)^b`, matchRegexp},
		{"^caf\uFFFD", matchRegexp},
		{`^a$`, matchEqual},
	} {
		re := regexp.MustCompile(tc.pattern)
		m := newMatcher(re)
		if m.kind != tc.kind {
			t.Errorf("%q: kind %d, want %d", tc.pattern, m.kind, tc.kind)
		}
		for _, in := range inputs {
			if got, want := m.match([]byte(in)), re.MatchString(in); got != want {
				t.Errorf("%q on %q: %v, regexp says %v", tc.pattern, in, got, want)
			}
		}
	}
}
