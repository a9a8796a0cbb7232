package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// completeBash sources the bash script and returns what it completes for
// the command line words, the last being the word under the cursor.
func completeBash(t *testing.T, script string, words ...string) string {
	t.Helper()
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(q, " ") + ")\nCOMP_CWORD=" +
		strconv.Itoa(len(words)-1) + "\n_hotspot\necho \"${COMPREPLY[*]}\"\n"
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatchTo([]string{"completion", shell}, &stdout, &stderr); code != 0 {
		t.Fatalf("hotspot completion %s: exit %d, %s", shell, code, stderr.String())
	}
	p := filepath.Join(t.TempDir(), "hotspot."+shell)
	if err := os.WriteFile(p, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dispatchTo runs dispatch with os.Stdout redirected to stdout: subcommands
// print to os.Stdout.
func dispatchTo(args []string, stdout, stderr *bytes.Buffer) int {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan struct{})
	go func() { stdout.ReadFrom(r); close(done) }()
	code := dispatch(args, w, stderr)
	os.Stdout = saved
	w.Close()
	<-done
	return code
}

func TestCompletionBash(t *testing.T) {
	script := writeScript(t, "bash")
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"hotspot", ""}, "bench block completion demo history hotkeys load pin rules unblock unpin warm watch help"},
		{[]string{"hotspot", "lo"}, "load"},
		{[]string{"hotspot", "hotkeys", "--a"}, "--app"}, // --addr is deprecated: not offered
		{[]string{"hotspot", "load", "--hots"}, "--hotspotd"},
		{[]string{"hotspot", "load", "--qu"}, "--quiet"},
		{[]string{"hotspot", "hotkeys", "--hotspotd", ""}, ""}, // a value: the shell's default
		{[]string{"hotspot", "completion", ""}, "bash zsh"},
		{[]string{"hotspot", "completion", "z"}, "zsh"},
		{[]string{"hotspot", "nosuch", "--"}, ""},
		{[]string{"hotspot", "rules", ""}, "get set delete"},
		{[]string{"hotspot", "rules", "s"}, "set"},
		{[]string{"hotspot", "rules", "set", "--f"}, "--f"},
		{[]string{"hotspot", "rules", "set", "-f", ""}, ""}, // a file name: the shell's default
		{[]string{"hotspot", "pin", "--admin"}, "--admin-token --admin-token-file"},
	}
	for _, tt := range tests {
		if got := completeBash(t, script, tt.words...); got != tt.want {
			t.Errorf("complete %q: got %q, want %q", tt.words, got, tt.want)
		}
	}

	// Every flag of every subcommand, as the subcommand itself defines it.
	specs, err := commandSpecs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Name == "completion" {
			continue
		}
		var want []string
		for _, f := range s.Flags {
			want = append(want, "--"+f.Name)
		}
		want = append(want, "--help")
		if len(want) < 2 {
			t.Errorf("%s: no flags found", s.Name)
		}
		words := []string{"hotspot", s.Name}
		if len(s.Words) > 0 {
			words = append(words, s.Words[0]) // the flags follow the verb
		}
		if got := completeBash(t, script, append(words, "--")...); got != strings.Join(want, " ") {
			t.Errorf("complete hotspot %s --: got %q, want %q", s.Name, got, strings.Join(want, " "))
		}
	}
}

func TestCompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("zsh not found (make tools installs it)")
		}
		t.Skip("zsh not found")
	}
	script := writeScript(t, "zsh")
	if out, err := exec.Command("zsh", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	// Sourced after compinit, it registers _hotspot for hotspot and defines
	// a case for every subcommand.
	prog := "autoload -U compinit && compinit -u -d " + filepath.Join(t.TempDir(), "zcompdump") +
		" && source " + script + " && print -r -- $_comps[hotspot]"
	out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_hotspot" {
		t.Fatalf("zsh: completion function for hotspot = %q, %v; want _hotspot", out, err)
	}

	// _hotspot's dispatch, with zsh's completion helpers replaced by
	// functions that print what they were given.
	complete := func(words ...string) string {
		prog := `_describe() { print -r -- ${(j: :)${(P)4}%%:*} }
_arguments() { local a; for a in "$@"; do print -rn -- "${a%%\[*} "; done; print }
_values() { shift; print -r -- "$@" }
compdef() { }
source ` + script + `
words=(` + strings.Join(words, " ") + `) CURRENT=` + strconv.Itoa(len(words)) + `
_hotspot`
		out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := complete("hotspot", "''"), "bench block completion demo history hotkeys load pin rules unblock unpin warm watch"; got != want {
		t.Errorf("commands: got %q, want %q", got, want)
	}
	if got, want := complete("hotspot", "completion", "''"), "bash zsh"; got != want {
		t.Errorf("completion's words: got %q, want %q", got, want)
	}
	specs, err := commandSpecs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Name == "completion" {
			continue
		}
		var want []string
		if len(s.Words) > 0 { // the verb first, as _arguments' first argument
			want = append(want, "1:"+s.Name+":("+strings.Join(s.Words, " ")+")")
		}
		for _, f := range s.Flags {
			want = append(want, "--"+f.Name)
		}
		want = append(want, "--help")
		if got := complete("hotspot", s.Name, "--"); got != strings.Join(want, " ") {
			t.Errorf("hotspot %s flags: got %q, want %q", s.Name, got, strings.Join(want, " "))
		}
	}
}

func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "fish"}, {"completion", "bash", "zsh"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatchTo(args, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
			t.Errorf("hotspot %q: exit %d with %d bytes of output, want 2 and none", args, code, stdout.Len())
		}
	}
}
