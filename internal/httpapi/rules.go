package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/rules"
)

// Rules keeps the apps' rule lists with compare-and-set versions
// (internal/rulestore.Store, whose ErrConflict marks a stale version).
type Rules interface {
	Get(ctx context.Context, app string) (*rules.List, error)
	Put(ctx context.Context, l *rules.List) (*rules.List, error)
	Delete(ctx context.Context, app string, version int64) error
}

// rulesArgs reads app, checks the admin token for writes and that rules
// are kept; it answers w and returns false when the call cannot go on.
func (a *server) rulesArgs(w http.ResponseWriter, r *http.Request, write bool) (string, bool) {
	if write && !a.authorized(w, r) {
		return "", false
	}
	app, err := appParam(r.URL.Query())
	if err != nil {
		badRequest(w, err)
		return "", false
	}
	if a.cfg.Rules == nil {
		httpjson.Indent(w, http.StatusNotImplemented, map[string]string{"error": "rules are not kept by this process"})
		return "", false
	}
	return app, true
}

// getRules answers GET /v1/rules?app=: the stored list, or version 0 and
// no rules.
func (a *server) getRules(w http.ResponseWriter, r *http.Request) {
	app, ok := a.rulesArgs(w, r, false)
	if !ok {
		return
	}
	l, err := a.cfg.Rules.Get(r.Context(), app)
	if err != nil {
		a.rulesFailed(w, "reading", app, err)
		return
	}
	a.writeList(w, l)
}

// putRules answers PUT /v1/rules?app=: the body replaces the list of its
// version (0: none stored yet).
func (a *server) putRules(w http.ResponseWriter, r *http.Request) {
	app, ok := a.rulesArgs(w, r, true)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rules.MaxBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		httpjson.Indent(w, http.StatusRequestEntityTooLarge, &hotspotapi.Error{
			Message: fmt.Sprintf("rules: a rule list is at most %d bytes", rules.MaxBytes), Rule: ruleIndex(-1)})
		return
	case err != nil:
		badRequest(w, fmt.Errorf("reading the body: %w", err))
		return
	}
	l, err := rules.Decode(body)
	if err != nil {
		refuseRules(w, err)
		return
	}
	switch l.App {
	case "":
		l.App = app
	case app:
	default:
		refuseRules(w, &rules.Error{Index: -1, Reason: fmt.Sprintf("the body's app %q is not the query's %q", l.App, app)})
		return
	}
	stored, err := a.cfg.Rules.Put(r.Context(), l)
	if err != nil {
		a.rulesFailed(w, "writing", app, err)
		return
	}
	a.log.Info("operator changed rules", "app", app, "rules", len(stored.Rules), "version", stored.Version)
	a.writeList(w, stored)
}

// deleteRules answers DELETE /v1/rules?app=[&version=]: the app's keys
// follow the default rule again.
func (a *server) deleteRules(w http.ResponseWriter, r *http.Request) {
	app, ok := a.rulesArgs(w, r, true)
	if !ok {
		return
	}
	var version int64
	if s := r.URL.Query().Get("version"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			badRequest(w, fmt.Errorf("version must be an integer above 0, got %q", s))
			return
		}
		version = v
	}
	if err := a.cfg.Rules.Delete(r.Context(), app, version); err != nil {
		a.rulesFailed(w, "deleting", app, err)
		return
	}
	a.log.Info("operator deleted rules", "app", app)
	w.WriteHeader(http.StatusNoContent)
}

// writeList answers 200 with l as rules.Encode writes it.
func (a *server) writeList(w http.ResponseWriter, l *rules.List) {
	b, err := rules.Encode(l)
	if err != nil {
		httpjson.Indent(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	httpjson.Indent(w, http.StatusOK, json.RawMessage(b))
}

// refuseRules answers 400 for a list that failed its checks.
func refuseRules(w http.ResponseWriter, err error) {
	out := &hotspotapi.Error{Message: err.Error(), Rule: ruleIndex(-1)}
	if re, ok := errors.AsType[*rules.Error](err); ok {
		out.Rule = ruleIndex(re.Index)
	}
	httpjson.Indent(w, http.StatusBadRequest, out)
}

func ruleIndex(i int) *int { return &i }

// rulesFailed answers a failed store call: 409 for a stale version, 400
// for a list the store refused, 500 for a stored list that cannot be read,
// 503 when ZooKeeper did not answer.
func (a *server) rulesFailed(w http.ResponseWriter, op, app string, err error) {
	switch re, isRules := errors.AsType[*rules.Error](err); {
	case errors.Is(err, rulestore.ErrConflict):
		httpjson.Indent(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case isRules && op == "writing":
		refuseRules(w, re)
	case isRules:
		a.log.Error("stored rules cannot be read", "app", app, "err", err)
		httpjson.Indent(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		a.log.Error(op+" rules", "app", app, "err", err)
		httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	}
}
