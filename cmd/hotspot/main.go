// Command hotspot is Hotspot's workbench: it generates workloads, measures
// detection and drives the demo. Each subcommand's flags live in its own
// file (load.go, ...), its logic in internal/ (loadgen, bench, demo) or
// behind hotspotapi's client, and it has one line in the commands table
// below.
//
// Every flag has an environment variable, HOTSPOT_ and the flag name in upper
// case with - as _ (--brokers is HOTSPOT_BROKERS); a flag given on the command
// line wins, and an empty variable counts as unset. SIGINT or SIGTERM asks the
// running subcommand to stop cleanly; a second one kills it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/liblog"
)

// command is one subcommand. run parses its own flags from args (use
// newFlags and parseFlags) and returns nil, flag.ErrHelp after --help, a
// usageError for bad flags or arguments (exit 2), or any other error
// (exit 1); dispatch prints the error.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commandTable is the dispatch table, in the order --help lists them: every
// subcommand has its line here. (A func rather than a var: completion reads
// the table, and a var whose entries refer back to it would be an
// initialization cycle.)
func commandTable() []command {
	return []command{
		{"load", "produce a synthetic access workload to Kafka and record its ground truth", runLoad},
		{"hotkeys", "print the current hot keys from any hotspotd", runHotkeys},
		{"watch", "follow the hot set in ZooKeeper and print each change", runWatch},
		{"history", "print an app's stored promotions and demotions and its hot-key timeline", runHistory},
		{"demo", "the main job: a local cluster, two apps, Zipf traffic and a flash crowd, live", runDemo},
		{"bench", "run a workload against a running cluster and report throughput, delay and accuracy", runBench},
		{"warm", "fill an app's Redis from its source of truth before traffic is opened", runWarm},
		{"pin", "hold keys of an app hot whatever their rate", pinCommand("pin", hotspotapi.Pins, true)},
		{"unpin", "release pinned keys", pinCommand("unpin", hotspotapi.Pins, false)},
		{"block", "keep keys of an app from ever being hot", pinCommand("block", hotspotapi.Blocks, true)},
		{"unblock", "lift blocks", pinCommand("unblock", hotspotapi.Blocks, false)},
		{"completion", "print a shell completion script: hotspot completion bash|zsh", runCompletion},
		{"rules", "get, set or delete an app's rules: hotspot rules get|set|delete --app APP", runRules},
	}
}

func main() {
	// The libraries' own lines (go-redis, go-zookeeper) are not for the
	// user of this tool: each subcommand reports the errors that matter.
	liblog.Route(nil)
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage(stdout)
		return 0
	}
	var cmd *command
	commands := commandTable()
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "hotspot: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default handling: a second signal kills
	}()
	err := cmd.run(ctx, args[1:])
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "hotspot %s: %v (see hotspot %s --help)\n", name, err, name)
		return 2
	default:
		fmt.Fprintf(stderr, "hotspot %s: %v\n", name, err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: hotspot <command> [flags]\n\nCommands:\n")
	for _, c := range commandTable() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun hotspot <command> --help for its flags. Every flag can also be set with\n"+
		"HOTSPOT_<FLAG> (upper case, - as _); the command line wins, an empty variable counts as unset.\n")
}

// usageError marks a bad flag or argument: exit status 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// newFlags returns a flag set for subcommand name whose --help prints
// header, then the flags with their environment variables, to stdout (or
// to what fs.SetOutput names).
func newFlags(name, header string) *flag.FlagSet {
	fs := envflag.New("hotspot "+name, "HOTSPOT", header)
	if flagsHook != nil {
		flagsHook(fs) // completion.go
	}
	return fs
}

// hotspotdFlag defines --hotspotd, hotspotd's address (addresses, where
// usage says so), with --addr, its name in the commands that once used it,
// as a deprecated alias.
func hotspotdFlag(fs *flag.FlagSet, usage string) *string {
	p := fs.String("hotspotd", "127.0.0.1:7070", usage)
	envflag.Deprecated(fs, "addr", "hotspotd", os.Stderr)
	return p
}

// parseFlags parses args and the HOTSPOT_* variables into fs (envflag.Parse);
// errors other than flag.ErrHelp come back as usageError, for dispatch to
// print.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	err := envflag.Parse(fs, "HOTSPOT", args, getenv)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err}
	}
	return err
}
