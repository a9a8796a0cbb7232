package hotwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// New returns a Watcher that follows the hot set through s. Start it with Run.
func New(s *zkgroup.Session, cfg Config) (*Watcher, error) {
	if s == nil {
		return nil, errors.New("hotwatch: nil session")
	}
	if cfg.Root != "" && (!strings.HasPrefix(cfg.Root, "/") || strings.HasSuffix(cfg.Root, "/")) {
		return nil, fmt.Errorf("hotwatch: Root %q must start and not end with /", cfg.Root)
	}
	w := newWatcher(func(ctx context.Context, dir string, read func(string) bool, fn func(map[string][]byte)) error {
		return s.WatchSome(ctx, dir, read, fn)
	}, cfg)
	w.connected = s.Connected
	return w, nil
}
