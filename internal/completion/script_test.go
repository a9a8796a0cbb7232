package completion

import (
	"strings"
	"testing"
)

func TestZshQuoting(t *testing.T) {
	if got, want := zshEscape(`a [b]: c\`), `a \[b\]\: c\\`; got != want {
		t.Errorf("zshEscape = %q, want %q", got, want)
	}
	if got, want := zshQuote("it's"), `'it'\''s'`; got != want {
		t.Errorf("zshQuote = %q, want %q", got, want)
	}
}

// TestBashValuedFlags: a flag with a value leaves its value to the shell;
// a command's first words come before its flags.
func TestBashValuedFlags(t *testing.T) {
	var b strings.Builder
	err := Bash(&b, []Command{{Name: "rules", Words: []string{"get", "set"}, Flags: []Flag{{Name: "f", Value: true}, {Name: "json"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"case $prev in --f|-f) return ;; esac", `compgen -W "get set"`, `compgen -W "--f --json --help"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("script lacks %q:\n%s", want, b.String())
		}
	}
}
