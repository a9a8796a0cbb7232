package httpsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// Loader loads a key's value from the URL its Template makes of it.
type Loader struct {
	// Template is the value's URL: {key} is replaced by the key, {id} by
	// the part of the key after its first ':', both path-escaped.
	Template string
	Client   *http.Client // nil means http.DefaultClient
}

var _ hotcache.Loader = (*Loader)(nil)

// URL returns the URL of key's value.
func (l *Loader) URL(key string) string {
	_, id, _ := strings.Cut(key, ":")
	return strings.NewReplacer("{key}", url.PathEscape(key), "{id}", url.PathEscape(id)).Replace(l.Template)
}

// Load reads key's value.
func (l *Loader) Load(ctx context.Context, key string) ([]byte, error) {
	u := l.URL(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c := l.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", u, hotcache.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, errors.New(u + ": " + resp.Status)
	}
	return body, nil
}
