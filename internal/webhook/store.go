package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// Version is the encoding version of a subscriptions node.
const Version = 1

// MaxPerApp bounds one app's subscriptions.
const MaxPerApp = 100

// Errors of Store.Put.
var (
	ErrInvalid = errors.New("webhook: invalid subscription")
	ErrTooMany = errors.New("webhook: too many subscriptions")
)

// Subscription is one receiver of an app's promotions and demotions.
type Subscription struct {
	Name   string `json:"name"`             // 1 to 64 of [A-Za-z0-9._-], unique within the app
	URL    string `json:"url"`              // http or https
	Secret string `json:"secret,omitempty"` // HMAC-SHA256 key of the signature; "" sends unsigned
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Check reports what is wrong with s, wrapping ErrInvalid.
func (s Subscription) Check() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("%w: name %q must be 1 to 64 letters, digits, '.', '_' or '-'", ErrInvalid, s.Name)
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s.URL) > 2048 {
		return fmt.Errorf("%w: url %q must be an absolute http or https URL of at most 2048 bytes", ErrInvalid, s.URL)
	}
	if len(s.Secret) > 256 {
		return fmt.Errorf("%w: secret must be at most 256 bytes", ErrInvalid)
	}
	return nil
}

// node is the content of <root>/webhooks/<app>.
type node struct {
	V     int            `json:"v"`
	App   string         `json:"app"`
	Hooks []Subscription `json:"hooks"`
}

// Dir is the folder of the subscription nodes under root.
func Dir(root string) string { return path.Join(root, "webhooks") }

// Path is the node of app's subscriptions.
func Path(root, app string) string { return path.Join(Dir(root), hotset.Escape(app)) }

// Decode reads a subscriptions node, refusing versions it does not know.
func Decode(b []byte) (app string, subs []Subscription, err error) {
	var n node
	if err := json.Unmarshal(b, &n); err != nil {
		return "", nil, fmt.Errorf("webhook: decode: %w", err)
	}
	if n.V != Version {
		return "", nil, fmt.Errorf("webhook: unknown encoding version %d", n.V)
	}
	return n.App, n.Hooks, nil
}

func encode(app string, subs []Subscription) ([]byte, error) {
	return json.Marshal(node{V: Version, App: app, Hooks: subs})
}

// Store reads and writes subscriptions under one root.
type Store struct {
	s    *zkgroup.Session
	root string
}

// NewStore returns a Store over s; root "" means hotset.DefaultRoot.
func NewStore(s *zkgroup.Session, root string) *Store {
	if root == "" {
		root = hotset.DefaultRoot
	}
	return &Store{s: s, root: root}
}

// List returns app's subscriptions, by name.
func (st *Store) List(ctx context.Context, app string) ([]Subscription, error) {
	subs, _, err := st.read(ctx, Path(st.root, app))
	return subs, err
}

// Put creates or replaces app's subscription named s.Name.
func (st *Store) Put(ctx context.Context, app string, s Subscription) error {
	if err := s.Check(); err != nil {
		return err
	}
	return st.modify(ctx, app, func(subs []Subscription) ([]Subscription, error) {
		i, found := slices.BinarySearchFunc(subs, s.Name, func(x Subscription, n string) int { return strings.Compare(x.Name, n) })
		switch {
		case found:
			subs[i] = s
		case len(subs) >= MaxPerApp:
			return nil, fmt.Errorf("%w: app %s already has %d", ErrTooMany, app, MaxPerApp)
		default:
			subs = slices.Insert(subs, i, s)
		}
		return subs, nil
	})
}

// Delete removes app's subscription name; removing one that is not there
// changes nothing.
func (st *Store) Delete(ctx context.Context, app, name string) error {
	return st.modify(ctx, app, func(subs []Subscription) ([]Subscription, error) {
		return slices.DeleteFunc(subs, func(x Subscription) bool { return x.Name == name }), nil
	})
}

// modify applies fn to app's subscriptions and writes them back if they
// changed, with ZooKeeper's version check, retrying when another writer got
// in between. An emptied list's node is deleted.
func (st *Store) modify(ctx context.Context, app string, fn func([]Subscription) ([]Subscription, error)) error {
	p := Path(st.root, app)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		subs, version, err := st.read(ctx, p)
		if err != nil {
			return err
		}
		before := slices.Clone(subs)
		if subs, err = fn(subs); err != nil {
			return err
		}
		if slices.Equal(before, subs) {
			return nil
		}
		var data []byte
		switch {
		case len(subs) == 0:
			err = st.s.Delete(ctx, p, version)
		case version < 0:
			if data, err = encode(app, subs); err == nil {
				// Subscriptions hold their HMAC secrets: hotspotd's
				// identity alone reads them (docs/security.md).
				err = st.s.CreatePrivate(ctx, p, data)
			}
		default:
			if data, err = encode(app, subs); err == nil {
				err = st.s.Set(ctx, p, data, version)
			}
		}
		if err == nil {
			return nil
		}
		conflict := errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode)
		if !conflict || attempt == 10 {
			return fmt.Errorf("webhook: write %s: %w", p, err)
		}
	}
}

// read returns the subscriptions of node p, by name, and its version (-1
// when it does not exist).
func (st *Store) read(ctx context.Context, p string) ([]Subscription, int32, error) {
	data, stat, err := st.s.Get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("webhook: read %s: %w", p, err)
	}
	_, subs, err := Decode(data)
	if err != nil {
		return nil, 0, fmt.Errorf("webhook: %s: %w", p, err)
	}
	slices.SortFunc(subs, func(x, y Subscription) int { return strings.Compare(x.Name, y.Name) })
	return subs, stat.Version, nil
}
