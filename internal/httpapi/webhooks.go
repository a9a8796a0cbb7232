package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/webhook"
)

// Webhooks keeps the webhook subscriptions (internal/webhook.Store).
type Webhooks interface {
	List(ctx context.Context, app string) ([]webhook.Subscription, error)
	Put(ctx context.Context, app string, s webhook.Subscription) error
	Delete(ctx context.Context, app, name string) error
}

// WebhookView is a subscription as GET /v1/webhooks lists it: the secret
// never leaves the cluster.
type WebhookView struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Signed bool   `json:"signed"` // a secret is set
}

// webhookArgs checks the admin token and reads app (and {name}); it answers
// w and returns false when the call cannot go on.
func (a *server) webhookArgs(w http.ResponseWriter, r *http.Request, named bool) (app, name string, ok bool) {
	if !a.authorized(w, r) {
		return "", "", false
	}
	app, err := appParam(r.URL.Query())
	if err != nil {
		badRequest(w, err)
		return "", "", false
	}
	if named {
		name = r.PathValue("name")
		if err := (webhook.Subscription{Name: name, URL: "http://x"}).Check(); err != nil {
			badRequest(w, err)
			return "", "", false
		}
	}
	if a.cfg.Webhooks == nil {
		httpjson.Indent(w, http.StatusNotImplemented, map[string]string{"error": "webhooks are not kept by this process"})
		return "", "", false
	}
	return app, name, true
}

func (a *server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	app, _, ok := a.webhookArgs(w, r, false)
	if !ok {
		return
	}
	subs, err := a.cfg.Webhooks.List(r.Context(), app)
	if err != nil {
		a.log.Error("reading webhooks", "app", app, "err", err)
		httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	out := make([]WebhookView, 0, len(subs))
	for _, s := range subs {
		out = append(out, WebhookView{Name: s.Name, URL: s.URL, Signed: s.Secret != ""})
	}
	httpjson.Indent(w, http.StatusOK, map[string]any{"app": app, "webhooks": out})
}

func (a *server) putWebhook(w http.ResponseWriter, r *http.Request) {
	app, name, ok := a.webhookArgs(w, r, true)
	if !ok {
		return
	}
	var body struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		badRequest(w, fmt.Errorf(`body must be JSON {"url": "...", "secret": "..."}: %w`, err))
		return
	}
	err := a.cfg.Webhooks.Put(r.Context(), app, webhook.Subscription{Name: name, URL: body.URL, Secret: body.Secret})
	if !a.webhookDone(w, err, "subscribed a webhook", app, name) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	app, name, ok := a.webhookArgs(w, r, true)
	if !ok {
		return
	}
	err := a.cfg.Webhooks.Delete(r.Context(), app, name)
	if !a.webhookDone(w, err, "removed a webhook", app, name) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// webhookDone answers a failed change and logs a successful one.
func (a *server) webhookDone(w http.ResponseWriter, err error, what, app, name string) bool {
	switch {
	case errors.Is(err, webhook.ErrInvalid):
		badRequest(w, err)
	case errors.Is(err, webhook.ErrTooMany):
		httpjson.Indent(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case err != nil:
		a.log.Error("changing webhooks", "app", app, "name", name, "err", err)
		httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	default:
		a.log.Info("operator "+what, "app", app, "name", name)
		return true
	}
	return false
}
