package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/hotspot-dev/hotspot/internal/envflag"
)

const completionHelp = `Prints a completion script for bash or zsh: the subcommands and each one's flags.

  bash: source <(hotspot completion bash)        (or save it in /etc/bash_completion.d/hotspot)
  zsh:  source <(hotspot completion zsh)         (after compinit; or save it as _hotspot in a directory of $fpath)`

// flagsHook, when set, sees every flag set newFlags builds. Completion sets
// it to learn each subcommand's flags from the subcommand itself.
var flagsHook func(*flag.FlagSet)

func runCompletion(ctx context.Context, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintf(os.Stdout, "usage: hotspot completion bash|zsh\n\n%s\n", completionHelp)
		return flag.ErrHelp
	}
	if len(args) != 1 {
		return usagef("want one shell, bash or zsh")
	}
	specs, err := commandSpecs(ctx)
	if err != nil {
		return err
	}
	switch args[0] {
	case "bash":
		return writeBash(os.Stdout, specs)
	case "zsh":
		return writeZsh(os.Stdout, specs)
	}
	return usagef("unknown shell %q (want bash or zsh)", args[0])
}

// verbs are the words a subcommand takes first, before its flags.
var verbs = map[string][]string{"rules": rulesVerbs}

// cmdSpec is what completion needs of a subcommand.
type cmdSpec struct {
	name, summary string
	flags         []flagSpec
	words         []string // its first word (completion's shells, rules' verbs); flags follow it
}

type flagSpec struct {
	name, usage string
	value       bool // takes a value (not a bool flag)
}

// commandSpecs asks every subcommand for its flags by running it with
// --help: each builds its flag set with newFlags and returns at --help,
// before doing anything.
func commandSpecs(ctx context.Context) ([]cmdSpec, error) {
	var specs []cmdSpec
	for _, c := range commandTable() {
		s := cmdSpec{name: c.name, summary: c.summary}
		if c.name == "completion" {
			s.words = []string{"bash", "zsh"}
			specs = append(specs, s)
			continue
		}
		var fs *flag.FlagSet
		flagsHook = func(f *flag.FlagSet) { fs = f; f.Usage = func() {} }
		err := c.run(ctx, []string{"--help"})
		flagsHook = nil
		if !errors.Is(err, flag.ErrHelp) || fs == nil {
			return nil, fmt.Errorf("completion: %s --help did not show its flags (%v)", c.name, err)
		}
		s.words = verbs[c.name]
		fs.VisitAll(func(f *flag.Flag) {
			if envflag.IsDeprecated(f) {
				return // still accepted, no longer offered
			}
			arg, usage := flag.UnquoteUsage(f)
			usage, _, _ = strings.Cut(usage, "\n")
			s.flags = append(s.flags, flagSpec{name: f.Name, usage: usage, value: arg != ""})
		})
		specs = append(specs, s)
	}
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].name < specs[j].name })
	return specs, nil
}

func writeBash(w io.Writer, specs []cmdSpec) error {
	var b strings.Builder
	b.WriteString(`# bash completion for hotspot: source <(hotspot completion bash)
_hotspot() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W "`)
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	b.WriteString(strings.Join(append(names, "help"), " "))
	b.WriteString(`" -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t%s)\n", s.name)
		var valued, all []string
		for _, f := range s.flags {
			all = append(all, "--"+f.name)
			if f.value {
				valued = append(valued, "--"+f.name)
				if len(f.name) == 1 {
					valued = append(valued, "-"+f.name) // -f FILE
				}
			}
		}
		if len(valued) > 0 {
			// A flag's value: leave it to the shell's default (file names).
			fmt.Fprintf(&b, "\t\tcase $prev in %s) return ;; esac\n", strings.Join(valued, "|"))
		}
		switch {
		case len(s.words) > 0 && len(all) == 0:
			fmt.Fprintf(&b, "\t\t[[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W %q -- \"$cur\"))\n", strings.Join(s.words, " "))
		case len(s.words) > 0:
			fmt.Fprintf(&b, "\t\tif [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(s.words, " "))
			fallthrough
		default:
			fmt.Fprintf(&b, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n", strings.Join(append(all, "--help"), " "))
		}
		b.WriteString("\t\t;;\n")
	}
	b.WriteString("\tesac\n}\ncomplete -o default -F _hotspot hotspot\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeZsh(w io.Writer, specs []cmdSpec) error {
	var b strings.Builder
	b.WriteString(`#compdef hotspot
# zsh completion for hotspot: source <(hotspot completion zsh) after compinit,
# or save as _hotspot in a directory of $fpath.
_hotspot() {
	local -a cmds
	cmds=(
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t\t%s\n", zshQuote(s.name+":"+s.summary))
	}
	b.WriteString(`	)
	if (( CURRENT == 2 )); then
		_describe -t commands 'hotspot command' cmds
		return
	fi
	local cmd=$words[2]
	shift words
	(( CURRENT-- ))
	case $cmd in
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t%s)\n", s.name)
		if len(s.words) > 0 && len(s.flags) == 0 {
			fmt.Fprintf(&b, "\t\t_values shell %s\n\t\t;;\n", strings.Join(s.words, " "))
			continue
		}
		b.WriteString("\t\t_arguments")
		if len(s.words) > 0 {
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshQuote("1:"+s.name+":("+strings.Join(s.words, " ")+")"))
		}
		for _, f := range s.flags {
			spec := "--" + f.name + "[" + zshEscape(f.usage) + "]"
			if f.value {
				spec += ":" + f.name + ":_default"
			}
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshQuote(spec))
		}
		b.WriteString(" \\\n\t\t\t'--help[show the flags]'\n\t\t;;\n")
	}
	b.WriteString(`	esac
}
if [[ $funcstack[1] == _hotspot ]]; then
	_hotspot "$@"
else
	compdef _hotspot hotspot
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshEscape escapes the characters _arguments gives a meaning to inside a
// description.
func zshEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

// zshQuote single-quotes s for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
