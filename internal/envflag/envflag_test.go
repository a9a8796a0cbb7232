package envflag

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // "str dur n"
		wantErr string
	}{
		{"defaults", nil, nil, "def 1s 1", ""},
		{"environment", nil, map[string]string{"X_SOME_STR": "env", "X_DUR": "2s", "X_N": "5"}, "env 2s 5", ""},
		{"command line wins", []string{"--some-str", "cli"}, map[string]string{"X_SOME_STR": "env"}, "cli 1s 1", ""},
		{"an empty variable counts", nil, map[string]string{"X_SOME_STR": ""}, " 1s 1", ""},
		{"bad value names the variable", nil, map[string]string{"X_DUR": "soon"}, "", `X_DUR="soon"`},
		{"bad value says what it wants", nil, map[string]string{"X_N": "many"}, "", `X_N="many" is not a valid int`},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		s := fs.String("some-str", "def", "")
		d := fs.Duration("dur", time.Second, "")
		n := fs.Int("n", 1, "")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := Apply(fs, "X", func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		got := fmt.Sprintf("%s %v %d", *s, *d, *n)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if f := fs.Lookup("some-str"); f.DefValue != "def" {
			t.Errorf("%s: default shown by --help became %q", tt.name, f.DefValue)
		}
	}
}

func TestNameAndSplitList(t *testing.T) {
	if got := Name("HOTSPOT", "zk-root"); got != "HOTSPOT_ZK_ROOT" {
		t.Errorf("Name = %q", got)
	}
	if got := SplitList(" a, ,b ,"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("SplitList = %q", got)
	}
	if _, ok := NonEmpty(func(string) string { return "" })("X"); ok {
		t.Error("NonEmpty found an empty variable")
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // the flag's value
		wantErr string
		help    []string // what --help prints
	}{
		{"environment", nil, map[string]string{"P_ZK_ROOT": "/env"}, "/env", "", nil},
		{"an empty variable counts as unset", nil, map[string]string{"P_ZK_ROOT": ""}, "/def", "", nil},
		{"command line wins", []string{"--zk-root", "/cli"}, map[string]string{"P_ZK_ROOT": "/env"}, "/cli", "", nil},
		{"an empty flag is a value", []string{"--zk-root", ""}, nil, "", "", nil},
		{"stray argument", []string{"x"}, nil, "", `unexpected argument "x"`, nil},
		{"unknown flag", []string{"--nope"}, nil, "", "flag provided but not defined", nil},
		{"help", []string{"--help"}, map[string]string{"P_ZK_ROOT": "/secret"}, "", "flag: help requested",
			[]string{"usage: prog [flags]\n\nWhat it does.\n", "--zk-root string   [P_ZK_ROOT]", "root (default /def)"}},
	}
	for _, tt := range tests {
		fs := New("prog", "P", "What it does.")
		var out strings.Builder
		fs.SetOutput(&out)
		root := fs.String("zk-root", "/def", "root")
		err := Parse(fs, "P", tt.args, func(k string) string { return tt.env[k] })
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || *root != tt.want):
			t.Errorf("%s: got %q, %v; want %q", tt.name, *root, err, tt.want)
		}
		for _, h := range tt.help {
			if !strings.Contains(out.String(), h) {
				t.Errorf("%s: --help printed %q, want it to contain %q", tt.name, out.String(), h)
			}
		}
		if strings.Contains(out.String(), "/secret") || (tt.help == nil && out.Len() > 0) {
			t.Errorf("%s: printed %q", tt.name, out.String())
		}
	}
}

// TestDeprecated: an old name still sets the flag, from the command line or
// its variable, and says it is deprecated; the new name wins over it.
func TestDeprecated(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     string
		wantWarn string // "" : no warning
	}{
		{"new name", []string{"--new", "a"}, nil, "a", ""},
		{"old name", []string{"--old", "b"}, nil, "b", "warning: --old is deprecated: use --new\n"},
		{"old variable", nil, map[string]string{"X_OLD": "c"}, "c", "warning: X_OLD is deprecated: use X_NEW\n"},
		{"new variable wins", nil, map[string]string{"X_OLD": "c", "X_NEW": "d"}, "d", ""},
		{"new flag wins over old variable", []string{"--new", "e"}, map[string]string{"X_OLD": "c"}, "e", ""},
		{"old flag wins over new variable", []string{"--old", "f"}, map[string]string{"X_NEW": "d"}, "f", "warning: --old is deprecated: use --new\n"},
		{"default", nil, nil, "def", ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v := fs.String("new", "def", "")
		var warn strings.Builder
		Deprecated(fs, "old", "new", &warn)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if err := Apply(fs, "X", func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if *v != tt.want || warn.String() != tt.wantWarn {
			t.Errorf("%s: got %q, warning %q; want %q, %q", tt.name, *v, warn.String(), tt.want, tt.wantWarn)
		}
		if !IsDeprecated(fs.Lookup("old")) || IsDeprecated(fs.Lookup("new")) {
			t.Errorf("%s: IsDeprecated wrong", tt.name)
		}
	}
}
