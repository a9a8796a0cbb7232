package hotspotapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/rules"
)

// ErrUnreachable wraps the error of a call that no hotspotd answered.
var ErrUnreachable = errors.New("hotspotapi: no hotspotd answers")

// Error is an answer other than success: its status and the {"error"}
// text of its body. It is also the body's JSON.
type Error struct {
	Status  int    `json:"-"`     // the HTTP status
	Message string `json:"error"` // the server's text (the body itself when it is not JSON)
	// Rule is the index of the first bad rule of a refused rule list
	// (PUT /v1/rules, 400 and 413), -1 for the list as a whole; nil
	// otherwise.
	Rule *int `json:"rule,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// ClientConfig tunes a Client; its zero value is the default.
type ClientConfig struct {
	HTTPClient *http.Client  // nil means http.DefaultClient
	AdminToken string        // sent as "Authorization: Bearer TOKEN"; admin calls need it
	Timeout    time.Duration // per call; 0 means 10 s
}

// Client calls the /v1 API of one hotspotd (any one answers for the whole
// cluster). It is safe for concurrent use.
type Client struct {
	base string // scheme://host:port
	cfg  ClientConfig
}

// NewClient returns a client of the hotspotd at addr: "host:port" (HTTP)
// or a URL such as "https://host:port".
func NewClient(addr string, cfg ClientConfig) (*Client, error) {
	base := addr
	if u, err := url.Parse(addr); err != nil || u.Scheme == "" || u.Host == "" {
		base = "http://" + addr
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("hotspotapi: bad address %q: want host:port or an http(s) URL", addr)
	}
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, http.DefaultClient)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	return &Client{base: strings.TrimSuffix(base, "/"), cfg: cfg}, nil
}

// Addr returns the address the client calls, as scheme://host:port.
func (c *Client) Addr() string { return c.base }

// HotKeys returns app's hot keys, by rate descending.
func (c *Client) HotKeys(ctx context.Context, app string) (AppHotKeys, error) {
	var out AppHotKeys
	return out, c.get(ctx, PathHotKeys, url.Values{"app": {app}}, &out)
}

// AllHotKeys returns the hot keys of every app that has any.
func (c *Client) AllHotKeys(ctx context.Context) (AllHotKeys, error) {
	var out AllHotKeys
	return out, c.get(ctx, PathHotKeys, nil, &out)
}

// Key returns one key's state: hot or not, its current rate, sources and
// effect.
func (c *Client) Key(ctx context.Context, app, key string) (KeyStatus, error) {
	var out KeyStatus
	return out, c.get(ctx, PathHotKeys+"/"+url.PathEscape(key), url.Values{"app": {app}}, &out)
}

// Top returns app's n (1 to MaxTopN) busiest keys, hot or not.
func (c *Client) Top(ctx context.Context, app string, n int) (Top, error) {
	var out Top
	return out, c.get(ctx, PathTop, url.Values{"app": {app}, "n": {strconv.Itoa(n)}}, &out)
}

// Instances returns the app instances ("" app: of every app) that reported
// reads of hot keys.
func (c *Client) Instances(ctx context.Context, app string) (Instances, error) {
	var q url.Values
	if app != "" {
		q = url.Values{"app": {app}}
	}
	var out Instances
	return out, c.get(ctx, PathInstances, q, &out)
}

// Events returns up to n (0: DefaultEventsN) recent promotions and
// demotions of app ("": every app) the hotspotd saw, newest first.
func (c *Client) Events(ctx context.Context, app string, n int) (Events, error) {
	q := url.Values{}
	if app != "" {
		q.Set("app", app)
	}
	if n != 0 {
		q.Set("n", strconv.Itoa(n))
	}
	var out Events
	return out, c.get(ctx, PathEvents, q, &out)
}

// History returns the stored promotions and demotions q selects, newest
// first.
func (c *Client) History(ctx context.Context, q HistoryQuery) (History, error) {
	v := url.Values{"app": {q.App}}
	if q.Key != "" {
		v.Set("key", q.Key)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out History
	return out, c.get(ctx, PathHistory, v, &out)
}

// Config returns the hotspotd's threshold and the topic it consumes.
func (c *Client) Config(ctx context.Context) (Config, error) {
	var out Config
	return out, c.get(ctx, PathConfig, nil, &out)
}

// Keys returns the keys of app's operator list l.
func (c *Client) Keys(ctx context.Context, l List, app string) (Keys, error) {
	var out Keys
	return out, c.get(ctx, "/v1/"+string(l), url.Values{"app": {app}}, &out)
}

// AddKey adds key to app's operator list l: pins it or blocks it (admin).
func (c *Client) AddKey(ctx context.Context, l List, app, key string) error {
	return c.do(ctx, http.MethodPut, "/v1/"+string(l)+"/"+url.PathEscape(key), url.Values{"app": {app}}, nil, nil)
}

// RemoveKey removes key from app's operator list l (admin).
func (c *Client) RemoveKey(ctx context.Context, l List, app, key string) error {
	return c.do(ctx, http.MethodDelete, "/v1/"+string(l)+"/"+url.PathEscape(key), url.Values{"app": {app}}, nil, nil)
}

// Rules returns app's rule list; version 0 and no rules when none is
// stored.
func (c *Client) Rules(ctx context.Context, app string) (*rules.List, error) {
	var raw json.RawMessage
	if err := c.get(ctx, PathRules, url.Values{"app": {app}}, &raw); err != nil {
		return nil, err
	}
	return decodeList(raw)
}

// PutRules replaces the rule list of l.App when l.Version is the stored
// version (0: none stored) and returns the stored list with its new
// version (admin). A refused list is an *Error with Rule set; another
// version, an *Error with status 409.
func (c *Client) PutRules(ctx context.Context, l *rules.List) (*rules.List, error) {
	b, err := rules.Encode(l)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPut, PathRules, url.Values{"app": {l.App}}, b, &raw); err != nil {
		return nil, err
	}
	return decodeList(raw)
}

// DeleteRules drops app's rule list, only at version if it is > 0 (admin);
// another version is an *Error with status 409.
func (c *Client) DeleteRules(ctx context.Context, app string, version int64) error {
	q := url.Values{"app": {app}}
	if version > 0 {
		q.Set("version", strconv.FormatInt(version, 10))
	}
	return c.do(ctx, http.MethodDelete, PathRules, q, nil, nil)
}

// Webhooks returns app's webhook subscriptions (admin).
func (c *Client) Webhooks(ctx context.Context, app string) (Webhooks, error) {
	var out Webhooks
	return out, c.do(ctx, http.MethodGet, PathWebhooks, url.Values{"app": {app}}, nil, &out)
}

// PutWebhook subscribes (or replaces) app's webhook name (admin).
func (c *Client) PutWebhook(ctx context.Context, app, name string, w WebhookBody) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, PathWebhooks+"/"+url.PathEscape(name), url.Values{"app": {app}}, b, nil)
}

// DeleteWebhook unsubscribes app's webhook name (admin).
func (c *Client) DeleteWebhook(ctx context.Context, app, name string) error {
	return c.do(ctx, http.MethodDelete, PathWebhooks+"/"+url.PathEscape(name), url.Values{"app": {app}}, nil, nil)
}

// Metrics returns the hotspotd's metrics in Prometheus's text format,
// uncompressed.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var raw rawBody
	return raw, c.get(ctx, PathMetrics, nil, &raw)
}

func decodeList(raw []byte) (*rules.List, error) {
	l, err := rules.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("hotspotapi: the answer is not a rule list: %w", err)
	}
	return l, nil
}

// rawBody receives an answer as it is.
type rawBody []byte

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, q, nil, out)
}

// do sends one call and decodes a successful answer's body into out (nil:
// none expected; *rawBody: kept as it is). Any other answer is an *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("hotspotapi: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.AdminToken)
	}
	// Uncompressed: hotspotd would otherwise gzip its whole metrics page
	// for each scrape, charging the scraper's observation to its own CPU.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, req.URL.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("hotspotapi: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		return e
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *rawBody:
		*o = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("hotspotapi: %s answered %s with something that is not its JSON: %w", req.URL.Host, path, err)
	}
	return nil
}
