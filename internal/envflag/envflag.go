// Package envflag lets every flag of a flag.FlagSet also be set from an
// environment variable, PREFIX_NAME (the flag name upper-cased, - as _); the
// command line wins. Hotspot's three binaries share it.
//
// Invariant: the environment is applied after parsing, so a flag's default
// (what --help shows) is always the built-in one, never a value, or a
// secret, taken from the environment.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable of flag name: Name("HOTSPOT",
// "zk-root") is "HOTSPOT_ZK_ROOT".
func Name(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Apply sets every flag of fs that the command line did not set from its
// variable, when lookup finds one (os.LookupEnv: an empty value counts).
// Call it after fs.Parse. The error names the variable and its value.
func Apply(fs *flag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := Name(prefix, f.Name)
		if v, ok := lookup(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

// NonEmpty adapts a getenv function to Apply's lookup: an empty variable
// counts as unset.
func NonEmpty(getenv func(string) string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	}
}

// SplitList splits a comma-separated flag value, trimming spaces and
// dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
