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
