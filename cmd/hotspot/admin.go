package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/envflag"
)

const pinHelp = `
hotspot pin|unpin|block|unblock --app APP [flags] KEY...

Changes an app's operator lists through any hotspotd (PUT and DELETE
/v1/pins/{key} and /v1/blocks/{key}): pin holds each KEY hot whatever its
rate, unpin releases it, block keeps it from ever being hot (pinned or not),
unblock lifts that. Flags come before the keys; "--" ends them, for a key
that starts with "-". Every call needs hotspotd's admin token: --admin-token,
--admin-token-file or their HOTSPOT_ADMIN_TOKEN[_FILE] variables.`

// pinCommand is the command that adds keys to (add) or removes them from
// the operator list l: pin, unpin, block or unblock.
func pinCommand(name string, l hotspotapi.List, add bool) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		return pinCmd(ctx, name, l, add, args, os.Getenv, os.Stdout)
	}
}

// adminFlags are the flags of every call that changes hotspotd's state.
type adminFlags struct {
	addr, app, token, tokenFile *string
}

func addAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		addr:      hotspotdFlag(fs, "host:port of any hotspotd"),
		app:       fs.String("app", "", "the app (required)"),
		token:     fs.String("admin-token", "", "hotspotd's admin token"),
		tokenFile: fs.String("admin-token-file", "", "file holding hotspotd's admin token (instead of --admin-token, so it never shows in ps)"),
	}
}

// adminToken returns the token the flags give, read from its file if need be.
func (f adminFlags) adminToken() (string, error) {
	if *f.tokenFile == "" {
		return *f.token, nil
	}
	if *f.token != "" {
		return "", usagef("--admin-token and --admin-token-file: give one of them")
	}
	b, err := os.ReadFile(*f.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// client returns the client of the hotspotd the flags name, with the admin
// token they give.
func (f adminFlags) client() (*hotspotapi.Client, error) {
	token, err := f.adminToken()
	if err != nil {
		return nil, err
	}
	return apiClient(*f.addr, token)
}

// parseArgs is parseFlags for commands that take positional arguments
// after their flags; it returns them.
func parseArgs(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil, err
	}
	if err == nil {
		err = envflag.Apply(fs, "HOTSPOT", envflag.NonEmpty(getenv))
	}
	if err != nil {
		return nil, usageError{err}
	}
	return fs.Args(), nil
}

func pinCmd(ctx context.Context, name string, l hotspotapi.List, add bool, args []string, getenv func(string) string, out io.Writer) error {
	fs := newFlags(name, pinHelp)
	af := addAdminFlags(fs)
	keys, err := parseArgs(fs, args, getenv)
	if err != nil {
		return err
	}
	if *af.app == "" {
		return usagef("--app is required")
	}
	if len(keys) == 0 {
		return usagef("no key given")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	change, done := c.RemoveKey, map[string]string{"unpin": "unpinned", "unblock": "unblocked"}[name]
	if add {
		change, done = c.AddKey, map[string]string{"pin": "pinned", "block": "blocked"}[name]
	}
	for _, key := range keys {
		if err := change(ctx, l, *af.app, key); err != nil {
			return fmt.Errorf("%s %s of app %s: %w", name, key, *af.app, apiError(err))
		}
		fmt.Fprintf(out, "%s %s: %s\n", *af.app, key, done)
	}
	return nil
}
