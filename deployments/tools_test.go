package deployments

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// needTool returns the path of an external program a test needs. Without it
// the test is skipped, except under CI=true, where it fails: `make test`
// installs them (its tools target).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		msg := name + " not found (make tools installs it from Debian's packages)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds hotspotd, itemapp and hotspot from cmd/ once per test run,
// static (CGO_ENABLED=0, as in the image), and returns their directory.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "hotspot-deployments-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", binDir+"/", "../cmd/hotspotd", "../cmd/itemapp", "../cmd/hotspot")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoFile is a path relative to the repository root.
func repoFile(rel string) string { return filepath.Join("..", filepath.FromSlash(rel)) }
