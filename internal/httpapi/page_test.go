package httpapi

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPageRateFormat runs the page's own rate formatter (the fmt and
// rateFormat lines of page/page.js) in Node.js: every rate reads one way,
// whole numbers with thousands separators.
func TestPageRateFormat(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	src, err := os.ReadFile("page/page.js")
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "const rateFormat ") || strings.HasPrefix(line, "const fmt ") {
			defs = append(defs, line)
		}
	}
	if len(defs) != 2 {
		t.Fatalf("page.js: found %d of the 2 lines defining rateFormat and fmt", len(defs))
	}
	tests := []struct {
		rate float64
		want string
	}{
		{0, "0"}, {0.4, "0"}, {93.04, "93"}, {99.6, "100"}, {335, "335"}, {1000, "1,000"},
		{12480.2, "12,480"}, {2500000, "2,500,000"},
	}
	var rates []float64
	for _, tc := range tests {
		rates = append(rates, tc.rate)
	}
	in, _ := json.Marshal(rates)
	script := strings.Join(defs, "\n") + "\nconsole.log(JSON.stringify(" + string(in) + ".map(fmt)));"
	out, err := exec.Command(node, "-e", script).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(tests) {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for i, tc := range tests {
		if got[i] != tc.want {
			t.Errorf("fmt(%v) = %q, want %q", tc.rate, got[i], tc.want)
		}
	}
}
