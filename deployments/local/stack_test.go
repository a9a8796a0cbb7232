// Package local holds the checks of the local stack's script, stack.sh.
package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin returns a folder that stands for PATH: every program on the
// real PATH except mvn, plus an apt-get (and sudo) that log their arguments
// and "install" the maven package as an mvn that fakes the Kafka download.
// withMvn puts that mvn there from the start.
func fakeBin(t *testing.T, withMvn bool) (bin, aptLog, mvnLog string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "bin")
	aptLog, mvnLog = filepath.Join(dir, "apt.log"), filepath.Join(dir, "mvn.log")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			name := e.Name()
			if name == "mvn" || name == "apt-get" || name == "sudo" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(bin, name)); err == nil {
				continue // an earlier PATH entry wins
			}
			os.Symlink(filepath.Join(d, name), filepath.Join(bin, name))
		}
	}
	// mvn ... -Dkafka.version=V ... -DoutputDirectory=DIR: one empty jar,
	// or a failure for version 0.0.0-fail. Like Debian's Maven 3.8 in batch
	// mode with -Dstyle.color=never, it writes colour resets all the same.
	mvn := `#!/bin/sh
echo "$*" >>` + mvnLog + `
printf '\033[0m\033[0m'; printf '\033[0m\033[0m' >&2
for a in "$@"; do
	case $a in
	-Dkafka.version=*) v=${a#*=} ;;
	-DoutputDirectory=*) out=${a#*=} ;;
	esac
done
if [ "$v" = 0.0.0-fail ]; then printf '\033[1;31m[ERROR]\033[m no such artifact\n'; exit 1; fi
mkdir -p "$out" && : >"$out/kafka_2.13-$v.jar"
`
	apt := `#!/bin/sh
echo "$*" >>` + aptLog + `
for a in "$@"; do
	[ "$a" = maven ] && printf '%s' '` + strings.ReplaceAll(mvn, "'", `'\''`) + `' >` + bin + `/mvn && chmod +x ` + bin + `/mvn
done
exit 0
`
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("apt-get", apt)
	write("sudo", "#!/bin/sh\nexec \"$@\"\n")
	if withMvn {
		write("mvn", mvn)
	}
	return bin, aptLog, mvnLog
}

// TestInstallsMissingMaven runs `stack.sh install` with and without mvn on
// PATH: a missing Maven is installed from Debian's packages, then used to
// fetch Kafka; a present one is used as it is.
func TestInstallsMissingMaven(t *testing.T) {
	for _, tc := range []struct {
		name        string
		withMvn     bool
		wantInstall bool
	}{
		{"mvn missing", false, true},
		{"mvn present", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, aptLog, mvnLog := fakeBin(t, tc.withMvn)
			state := t.TempDir()
			cmd := exec.Command("bash", "stack.sh", "install")
			// HOTSPOT_KAFKA_LIBS would skip the Kafka fetch (and so Maven).
			cmd.Env = append(os.Environ(), "PATH="+bin, "HOTSPOT_STACK_DIR="+state, "HOTSPOT_KAFKA_VERSION=9.9.9-test", "HOTSPOT_KAFKA_LIBS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("stack.sh install: %v\n%s", err, out)
			}
			apt, _ := os.ReadFile(aptLog)
			installed := strings.Contains(string(apt), "install") && strings.Contains(" "+strings.ReplaceAll(string(apt), "\n", " ")+" ", " maven ")
			if installed != tc.wantInstall {
				t.Errorf("apt-get installed maven: %v, want %v; apt-get calls:\n%s\noutput:\n%s", installed, tc.wantInstall, apt, out)
			}
			if b, _ := os.ReadFile(mvnLog); !strings.Contains(string(b), "-Dkafka.version=9.9.9-test") {
				t.Errorf("mvn was not run for Kafka 9.9.9-test; mvn calls: %q\noutput:\n%s", b, out)
			}
			jar := filepath.Join(state, "kafka-9.9.9-test", "libs", "kafka_2.13-9.9.9-test.jar")
			if _, err := os.Stat(jar); err != nil {
				t.Errorf("Kafka was not fetched: %v\noutput:\n%s", err, out)
			}
			if strings.Contains(string(out), "\x1b") {
				t.Errorf("stack.sh install printed terminal escapes: %q", out)
			}
		})
	}
}

// TestMavenFailureShown: when Maven cannot fetch Kafka, its messages are
// shown, without terminal escapes, and stack.sh fails naming the artifact.
func TestMavenFailureShown(t *testing.T) {
	bin, _, _ := fakeBin(t, true)
	cmd := exec.Command("bash", "stack.sh", "install")
	cmd.Env = append(os.Environ(), "PATH="+bin, "HOTSPOT_STACK_DIR="+t.TempDir(), "HOTSPOT_KAFKA_VERSION=0.0.0-fail", "HOTSPOT_KAFKA_LIBS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("stack.sh install succeeded with a failing mvn:\n%s", out)
	}
	for _, want := range []string{"[ERROR] no such artifact", "kafka_2.13:0.0.0-fail"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "\x1b") {
		t.Errorf("output holds terminal escapes: %q", out)
	}
}
