package completion

import (
	"fmt"
	"io"
	"strings"
)

// Command is what completion needs of a subcommand.
type Command struct {
	Name, Summary string
	Flags         []Flag
	Words         []string // its first word (completion's shells, rules' verbs); flags follow it
}

// Flag is one flag of a Command.
type Flag struct {
	Name, Usage string // Usage: its first line
	Value       bool   // takes a value (not a bool flag)
}

// Bash writes the bash completion script of hotspot's commands to w.
func Bash(w io.Writer, specs []Command) error {
	var b strings.Builder
	b.WriteString(`# bash completion for hotspot: source <(hotspot completion bash)
_hotspot() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W "`)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	b.WriteString(strings.Join(append(names, "help"), " "))
	b.WriteString(`" -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t%s)\n", s.Name)
		var valued, all []string
		for _, f := range s.Flags {
			all = append(all, "--"+f.Name)
			if f.Value {
				valued = append(valued, "--"+f.Name)
				if len(f.Name) == 1 {
					valued = append(valued, "-"+f.Name) // -f FILE
				}
			}
		}
		if len(valued) > 0 {
			// A flag's value: leave it to the shell's default (file names).
			fmt.Fprintf(&b, "\t\tcase $prev in %s) return ;; esac\n", strings.Join(valued, "|"))
		}
		switch {
		case len(s.Words) > 0 && len(all) == 0:
			fmt.Fprintf(&b, "\t\t[[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W %q -- \"$cur\"))\n", strings.Join(s.Words, " "))
		case len(s.Words) > 0:
			fmt.Fprintf(&b, "\t\tif [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(s.Words, " "))
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

// Zsh writes the zsh completion script of hotspot's commands to w.
func Zsh(w io.Writer, specs []Command) error {
	var b strings.Builder
	b.WriteString(`#compdef hotspot
# zsh completion for hotspot: source <(hotspot completion zsh) after compinit,
# or save as _hotspot in a directory of $fpath.
_hotspot() {
	local -a cmds
	cmds=(
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t\t%s\n", zshQuote(s.Name+":"+s.Summary))
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
		fmt.Fprintf(&b, "\t%s)\n", s.Name)
		if len(s.Words) > 0 && len(s.Flags) == 0 {
			fmt.Fprintf(&b, "\t\t_values shell %s\n\t\t;;\n", strings.Join(s.Words, " "))
			continue
		}
		b.WriteString("\t\t_arguments")
		if len(s.Words) > 0 {
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshQuote("1:"+s.Name+":("+strings.Join(s.Words, " ")+")"))
		}
		for _, f := range s.Flags {
			spec := "--" + f.Name + "[" + zshEscape(f.Usage) + "]"
			if f.Value {
				spec += ":" + f.Name + ":_default"
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
