package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/hotspot-dev/hotspot/internal/completion"
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
		return completion.Bash(os.Stdout, specs)
	case "zsh":
		return completion.Zsh(os.Stdout, specs)
	}
	return usagef("unknown shell %q (want bash or zsh)", args[0])
}

// verbs are the words a subcommand takes first, before its flags.
var verbs = map[string][]string{"rules": rulesVerbs}

// commandSpecs asks every subcommand for its flags by running it with
// --help: each builds its flag set with newFlags and returns at --help,
// before doing anything.
func commandSpecs(ctx context.Context) ([]completion.Command, error) {
	var specs []completion.Command
	for _, c := range commandTable() {
		s := completion.Command{Name: c.name, Summary: c.summary}
		if c.name == "completion" {
			s.Words = []string{"bash", "zsh"}
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
		s.Words = verbs[c.name]
		fs.VisitAll(func(f *flag.Flag) {
			if envflag.IsDeprecated(f) {
				return // still accepted, no longer offered
			}
			arg, usage := flag.UnquoteUsage(f)
			usage, _, _ = strings.Cut(usage, "\n")
			s.Flags = append(s.Flags, completion.Flag{Name: f.Name, Usage: usage, Value: arg != ""})
		})
		specs = append(specs, s)
	}
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs, nil
}
