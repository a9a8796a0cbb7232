package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

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

func init() {
	for _, c := range []struct{ name, summary, kind, method string }{
		{"pin", "hold keys of an app hot whatever their rate", "pins", http.MethodPut},
		{"unpin", "release pinned keys", "pins", http.MethodDelete},
		{"block", "keep keys of an app from ever being hot", "blocks", http.MethodPut},
		{"unblock", "lift blocks", "blocks", http.MethodDelete},
	} {
		commands = append(commands, command{c.name, c.summary, func(ctx context.Context, args []string) error {
			return pinCmd(ctx, c.name, c.kind, c.method, args, os.Getenv, os.Stdout)
		}})
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

func pinCmd(ctx context.Context, name, kind, method string, args []string, getenv func(string) string, out io.Writer) error {
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
	token, err := af.adminToken()
	if err != nil {
		return err
	}
	for _, key := range keys {
		u := "http://" + *af.addr + "/v1/" + kind + "/" + url.PathEscape(key) + "?" + url.Values{"app": {*af.app}}.Encode()
		status, body, err := adminCall(ctx, method, u, token, nil)
		if err != nil {
			return err
		}
		if status != http.StatusNoContent {
			return fmt.Errorf("%s %s of app %s: %s", name, key, *af.app, answerError(status, body))
		}
		fmt.Fprintf(out, "%s %s: %s\n", *af.app, key, map[string]string{"pin": "pinned", "unpin": "unpinned", "block": "blocked", "unblock": "unblocked"}[name])
	}
	return nil
}

// adminCall sends one request to hotspotd's API with the admin token and
// returns the answer's status and body.
func adminCall(ctx context.Context, method, u, token string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, usagef("bad address: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client, err := hotspotdClient()
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("no hotspotd answers at %s (%v): start one, or pass --hotspotd", req.URL.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// answerError says what a failed answer means, with its {"error"} text.
func answerError(status int, body []byte) string {
	msg := strings.TrimSpace(string(body))
	if e := (struct {
		Error string `json:"error"`
	}{}); json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch status {
	case http.StatusUnauthorized:
		return "hotspotd refused the admin token (give it with --admin-token, --admin-token-file or HOTSPOT_ADMIN_TOKEN): " + msg
	case http.StatusForbidden:
		return "hotspotd refuses admin calls: " + msg
	}
	return fmt.Sprintf("%d %s: %s", status, http.StatusText(status), msg)
}
