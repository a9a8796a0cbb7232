package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/rules"
)

const rulesHelp = `
hotspot rules get|set|delete --app APP [flags]

Reads and changes an app's rule list through any hotspotd (/v1/rules; see
docs/rules.md):

  hotspot rules get --app shop [--json]
      prints the list and its version (--json: as a file set takes)
  hotspot rules set --app shop -f rules.yaml [--version V]
      replaces the list with the file's (YAML or JSON; "-" reads stdin).
      Without --version it reads the stored version first and replaces
      that one; with it, only that version (0: only if none is stored).
      Another writer in between: refused, nothing changed.
  hotspot rules delete --app shop [--version V]
      drops the list: the app's keys follow the default rule again

set and delete need hotspotd's admin token: --admin-token,
--admin-token-file or their HOTSPOT_ADMIN_TOKEN[_FILE] variables. A refused
list is reported with the index of its first bad rule (0 is the first).`

func runRules(ctx context.Context, args []string) error {
	return rulesCmd(ctx, args, os.Getenv, os.Stdin, os.Stdout)
}

// rulesVerbs are rules' subcommands (completion offers them).
var rulesVerbs = []string{"get", "set", "delete"}

func rulesCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, out io.Writer) error {
	verb := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	fs := newFlags("rules", rulesHelp)
	af := addAdminFlags(fs)
	file := fs.String("f", "", "set: the rules file, YAML or JSON; - reads stdin")
	version := fs.String("version", "", "set, delete: the version to replace (set: 0 creates); default: set replaces the stored one, delete whatever is stored")
	asJSON := fs.Bool("json", false, "get: print the list as JSON, the form set takes")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	switch verb {
	case "get", "set", "delete":
	case "":
		return usagef("want get, set or delete")
	default:
		return usagef("unknown %q (want get, set or delete)", verb)
	}
	if *af.app == "" {
		return usagef("--app is required")
	}
	var v int64 = -1
	if *version != "" {
		n, err := strconv.ParseInt(*version, 10, 64)
		if err != nil || n < 0 || (n == 0 && verb == "delete") {
			return usagef("--version %q is not a version (an integer from %d)", *version, map[bool]int{true: 1, false: 0}[verb == "delete"])
		}
		v = n
	}
	if verb == "get" {
		c, err := apiClient(*af.addr, "")
		if err != nil {
			return err
		}
		l, err := c.Rules(ctx, *af.app)
		if err != nil {
			return fmt.Errorf("rules of app %s: %w", *af.app, apiError(err))
		}
		if *asJSON {
			b, err := rules.Encode(l)
			if err != nil {
				return err
			}
			return printJSON(out, json.RawMessage(b))
		}
		return printRules(out, l)
	}
	if verb == "set" && *file == "" {
		return usagef("-f FILE is required")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	if verb == "delete" {
		if err := deleteRules(ctx, c, *af.app, max(v, 0)); err != nil {
			return err
		}
		fmt.Fprintf(out, "app %s: rules deleted; its keys follow the default rule\n", *af.app)
		return nil
	}
	l, err := readRulesFile(*file, stdin)
	if err != nil {
		return err
	}
	if l.App != "" && l.App != *af.app {
		return fmt.Errorf("%s is the list of app %q, not of --app %q", *file, l.App, *af.app)
	}
	l.App = *af.app
	if v < 0 { // read-modify-write
		cur, err := c.Rules(ctx, *af.app)
		if err != nil {
			return fmt.Errorf("rules of app %s: %w", *af.app, apiError(err))
		}
		v = cur.Version
	}
	l.Version = v
	stored, err := putRules(ctx, c, l)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "app %s: %s, version %d\n", stored.App, nRules(len(stored.Rules)), stored.Version)
	return nil
}

// readRulesFile reads a rule list from a YAML or JSON file (JSON is taken
// as it is; YAML is turned into the same JSON) and checks it as hotspotd
// will, so that its errors are the same.
func readRulesFile(name string, stdin io.Reader) (*rules.List, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, rules.MaxBytes+1))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return nil, fmt.Errorf("%s: not YAML or JSON: %w", name, err)
		}
	}
	l, err := rules.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, listError(err))
	}
	return l, nil
}

// listError turns a *rules.Error into "rule I: reason" or "the list: reason".
func listError(err error) error {
	re, ok := errors.AsType[*rules.Error](err)
	if !ok {
		return err
	}
	if re.Index < 0 {
		return fmt.Errorf("the list: %s", re.Reason)
	}
	return fmt.Errorf("rule %d: %s", re.Index, re.Reason)
}

// putRules stores l, saying what a refusal means.
func putRules(ctx context.Context, c *hotspotapi.Client, l *rules.List) (*rules.List, error) {
	stored, err := c.PutRules(ctx, l)
	if err == nil {
		return stored, nil
	}
	if e, ok := errors.AsType[*hotspotapi.Error](err); ok {
		switch {
		case e.Rule != nil:
			return nil, fmt.Errorf("hotspotd refused the list: %w",
				listError(&rules.Error{Index: *e.Rule, Reason: reason(e.Message, *e.Rule)}))
		case e.Status == http.StatusConflict:
			return nil, fmt.Errorf("the rules of app %s changed since version %d (another writer): nothing changed; get them again and retry", l.App, l.Version)
		}
	}
	return nil, fmt.Errorf("rules of app %s: %w", l.App, apiError(err))
}

// reason strips what listError adds back from a server's error text.
func reason(msg string, index int) string {
	msg = strings.TrimPrefix(msg, "rules: ")
	if index >= 0 {
		msg = strings.TrimPrefix(msg, fmt.Sprintf("rule %d: ", index))
	}
	return msg
}

// deleteRules drops app's list (at version, when > 0), saying what a
// refusal means.
func deleteRules(ctx context.Context, c *hotspotapi.Client, app string, version int64) error {
	err := c.DeleteRules(ctx, app, version)
	if e, ok := errors.AsType[*hotspotapi.Error](err); ok && e.Status == http.StatusConflict {
		return fmt.Errorf("the rules of app %s are not at version %d: nothing deleted", app, version)
	}
	if err != nil {
		return fmt.Errorf("rules of app %s: %w", app, apiError(err))
	}
	return nil
}

// printRules prints a list as a table, each absent field as "-" (the
// default rule's value).
func printRules(out io.Writer, l *rules.List) error {
	if l.Version == 0 {
		fmt.Fprintf(out, "app %s has no rules: every key follows the default rule\n", l.App)
		return nil
	}
	fmt.Fprintf(out, "app %s: %s, version %d (first match wins; - is the default rule's value)\n", l.App, nRules(len(l.Rules)), l.Version)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tMATCH\tPATTERN\tMODE\tMEASURE\tOPS\tTHRESHOLD/S\tWINDOW\tHOLD\tLOW\tK")
	dash := func(s string, zero bool) string {
		if zero {
			return "-"
		}
		return s
	}
	for i, r := range l.Rules {
		fmt.Fprintf(tw, "%d\t%s\t%q\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i, r.Match, r.Pattern,
			dash(string(r.Mode), r.Mode == ""), dash(string(r.Measure), r.Measure == ""), dash(string(r.Ops), r.Ops == ""),
			dash(strconv.FormatFloat(r.Threshold, 'g', -1, 64), r.Threshold == 0),
			dash(r.Window.String(), r.Window == 0), dash(r.Hold.String(), r.Hold == 0),
			dash(strconv.FormatFloat(r.Low, 'g', -1, 64), r.Low == 0), dash(strconv.Itoa(r.K), r.K == 0))
	}
	return tw.Flush()
}

func nRules(n int) string {
	if n == 1 {
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}
