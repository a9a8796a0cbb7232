package deployments

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAlertRules checks prometheus/alerts.yml with promtool and runs its unit
// tests (prometheus/alerts_test.yml): each alert fires on its condition, with
// the labels and annotations an operator will read, and stays quiet short of
// it.
func TestAlertRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
