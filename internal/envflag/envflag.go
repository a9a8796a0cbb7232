// Package envflag is the one flags-and-environment rule of Hotspot's three
// binaries (hotspotd, hotspot, itemapp): every flag can also be set from an
// environment variable, PREFIX_NAME (the flag name upper-cased, - as _); the
// command line wins; an empty variable counts as unset. New and Parse give
// them one --help style, which lists each flag with its variable.
//
// Invariant: the environment is applied after parsing, so a flag's default
// (what --help shows) is always the built-in one, never a value, or a
// secret, taken from the environment.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// New returns a flag set for the program prog (e.g. "hotspot load") whose
// flags read PREFIX_* variables. Its --help prints the usage line, header,
// then every flag with its variable and default, to stdout (or to what
// fs.SetOutput names).
func New(prog, prefix, header string) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s [flags]\n\n%s\n\nFlags (each also read from the environment variable shown):\n", prog, strings.TrimSpace(header))
		fs.VisitAll(func(f *flag.Flag) {
			arg, text := flag.UnquoteUsage(f)
			fmt.Fprintf(out, "  --%s", f.Name)
			if arg != "" {
				fmt.Fprintf(out, " %s", arg)
			}
			fmt.Fprintf(out, "   [%s]\n    \t%s", Name(prefix, f.Name), strings.ReplaceAll(text, "\n", "\n    \t"))
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" {
				fmt.Fprintf(out, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(out)
		})
	}
	return fs
}

// Parse parses args into fs, then sets every flag the command line did not
// set from its PREFIX_* variable as getenv (os.Getenv) reads it, an empty
// value counting as unset. Positional arguments are refused. --help prints
// the usage to fs.Output() and returns flag.ErrHelp; other errors are
// returned for the caller to print, never printed.
func Parse(fs *flag.FlagSet, prefix string, args []string, getenv func(string) string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // flag would print errors and the usage itself
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	return Apply(fs, prefix, NonEmpty(getenv))
}

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
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if a, ok := f.Value.(*alias); ok {
			given[a.name] = true // the alias gave the flag its value
		}
	})
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := Name(prefix, f.Name)
		a, isAlias := f.Value.(*alias)
		if isAlias {
			if _, ok := lookup(Name(prefix, a.name)); ok || given[a.name] {
				return // the flag's own variable or command line wins
			}
		}
		if v, ok := lookup(name); ok {
			target := f.Value
			if isAlias {
				target = a.target.Value
				fmt.Fprintf(a.warn, "warning: %s is deprecated: use %s\n", name, Name(prefix, a.name))
			}
			if e := target.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
				if typ, _ := flag.UnquoteUsage(f); typ != "" { // "duration", "int", ...
					err = fmt.Errorf("%s=%q is not a valid %s: %v", name, v, typ, e)
				}
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

// Deprecated registers old as a deprecated alias of fs's flag name, which
// must be defined already: --old (or old's variable) sets name's value and
// writes a warning that says to use name instead to warn. name given on
// the command line, or its variable, wins over old's variable. --help
// lists old as deprecated; IsDeprecated tells it apart (shell completion
// leaves it out).
func Deprecated(fs *flag.FlagSet, old, name string, warn io.Writer) {
	target := fs.Lookup(name)
	if target == nil {
		panic("envflag: Deprecated: no flag " + name)
	}
	fs.Var(&alias{target: target, old: old, name: name, warn: warn}, old, "deprecated: use --"+name)
}

// IsDeprecated reports whether f is an alias that Deprecated registered.
func IsDeprecated(f *flag.Flag) bool {
	_, ok := f.Value.(*alias)
	return ok
}

// alias is the flag.Value of a deprecated flag name: it sets its target.
type alias struct {
	target    *flag.Flag
	old, name string
	warn      io.Writer
}

func (a *alias) String() string { return "" } // no default of its own: --help shows none

func (a *alias) Set(v string) error {
	fmt.Fprintf(a.warn, "warning: --%s is deprecated: use --%s\n", a.old, a.name)
	return a.target.Value.Set(v)
}

// IsBoolFlag lets an alias of a bool flag be given without a value.
func (a *alias) IsBoolFlag() bool {
	b, ok := a.target.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
