package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/webhook"
)

// Webhooks keeps the webhook subscriptions (internal/webhook.Store).
type Webhooks interface {
	List(ctx context.Context, app string) ([]webhook.Subscription, error)
	Put(ctx context.Context, app string, s webhook.Subscription) error
	Delete(ctx context.Context, app, name string) error
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
	out := hotspotapi.Webhooks{App: app, Webhooks: make([]hotspotapi.Webhook, 0, len(subs))}
	for _, s := range subs {
		out.Webhooks = append(out.Webhooks, hotspotapi.Webhook{Name: s.Name, URL: s.URL, Signed: s.Secret != ""})
	}
	httpjson.Indent(w, http.StatusOK, out)
}

func (a *server) putWebhook(w http.ResponseWriter, r *http.Request) {
	app, name, ok := a.webhookArgs(w, r, true)
	if !ok {
		return
	}
	var body hotspotapi.WebhookBody
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
