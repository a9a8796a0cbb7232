package zkgroup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrSessionClosed is returned by the loops of this package once their
// Session has been closed.
var ErrSessionClosed = errors.New("zkgroup: session closed")

// Config tunes a Session. A zero field means the default.
type Config struct {
	SessionTimeout time.Duration // requested session timeout; 0 means 6s (the server may clamp it)
	Dialer         zk.Dialer     // opens TCP connections; nil means net.DialTimeout
	// Auth is the digest identity the session authenticates as (re-sent on
	// every reconnect); zero means none.
	Auth Digest
	// ACL is what every node created through this session carries (Join,
	// Create, Put and the parents they make); the zero ACL leaves nodes
	// open (see ACL).
	ACL        ACL
	Logger     *slog.Logger          // nil discards; go-zookeeper's own lines go to Debug
	Registerer prometheus.Registerer // nil: not exported; Sessions sharing a Registerer share its counters
}

// Session is a ZooKeeper client connection and the state of its session.
// go-zookeeper reconnects by itself, keeping the session when it can and
// opening a new one after the server expired the old one; Session reports
// the expiries (Expired) so that users can redo session-bound work.
type Session struct {
	conn   *zk.Conn
	acl    []zk.ACL // what the nodes this session creates carry (Config.ACL)
	secret []zk.ACL // what CreatePrivate's nodes carry: Config.ACL's writer only
	log    *slog.Logger
	m      *metrics
	closed chan struct{} // closed by Close
	once   sync.Once

	hasSession chan struct{} // closed at the first StateHasSession
	firstOnce  sync.Once
	afterExp   atomic.Bool // the next StateHasSession starts a new session

	mu      sync.Mutex    // guards expired
	expired chan struct{} // closed when the current session expires, then replaced
}

type metrics struct {
	sessions, expiries, retries prometheus.Counter
	connected                   prometheus.Gauge
	// watchReads counts the reads Watch makes (getChildren and getData);
	// watchBytes the node data they returned (children's names and
	// ZooKeeper's framing not included): what a hot-set change costs a
	// watcher.
	watchReads, watchBytes prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string) prometheus.Counter {
		return register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "zk", Name: name, Help: help}))
	}
	return &metrics{
		sessions:   c("sessions_total", "ZooKeeper sessions established (the first one and one after every expiry)."),
		expiries:   c("session_expirations_total", "ZooKeeper sessions expired by the server."),
		retries:    c("retries_total", "ZooKeeper calls of watch and membership loops that failed and were retried."),
		watchReads: c("watch_reads_total", "Reads (getChildren, getData) made by watches of a group's nodes."),
		watchBytes: c("watch_read_bytes_total", "Bytes of node data read by watches of a group's nodes."),
		connected: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "zk", Name: "connected",
			Help: "1 while the ZooKeeper connection has a session, else 0."})),
	}
}

// register registers c with reg, or returns the collector already registered
// under the same name: a process that connects again after a failed attempt
// (hotcache does) keeps one set of counters instead of panicking.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(T); ok {
				return old
			}
		}
		panic(fmt.Sprintf("zkgroup: register metrics: %v", err))
	}
	return c
}

// Connect opens a session with the ZooKeeper ensemble servers ("host:port")
// and waits until it is established or ctx ends.
func Connect(ctx context.Context, servers []string, cfg Config) (*Session, error) {
	if len(servers) == 0 {
		return nil, errors.New("zkgroup: no ZooKeeper servers")
	}
	if cfg.SessionTimeout < 0 {
		return nil, fmt.Errorf("zkgroup: SessionTimeout %v must be >= 0", cfg.SessionTimeout)
	}
	cfg.SessionTimeout = cmp.Or(cfg.SessionTimeout, 6*time.Second)
	s := &Session{
		log:        cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		m:          newMetrics(cfg.Registerer),
		closed:     make(chan struct{}),
		hasSession: make(chan struct{}),
		expired:    make(chan struct{}),
		acl:        cfg.ACL.list(),
		secret:     cfg.ACL.private(),
	}
	dialer := cfg.Dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	// The event channel that Connect returns is left unread: go-zookeeper
	// drops events when it is full, and onEvent sees them all.
	conn, _, err := zk.Connect(servers, cfg.SessionTimeout,
		zk.WithEventCallback(s.onEvent), zk.WithLogger(zkLogger{s.log}), zk.WithDialer(dialer))
	if err != nil {
		return nil, fmt.Errorf("zkgroup: connect %v: %w", servers, err)
	}
	s.conn = conn
	select {
	case <-s.hasSession:
		if !cfg.Auth.IsZero() {
			// go-zookeeper keeps the credentials and re-sends them
			// after every reconnect, before any other request.
			if err := conn.AddAuth("digest", []byte(cfg.Auth.User+":"+cfg.Auth.Password)); err != nil {
				s.Close()
				return nil, fmt.Errorf("zkgroup: digest auth as %q: %w", cfg.Auth.User, err)
			}
		}
		s.log.Info("zookeeper session established", "servers", servers, "session", fmt.Sprintf("%#x", conn.SessionID()))
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("zkgroup: connect %v: %w", servers, ctx.Err())
	}
}

// onEvent runs on go-zookeeper's goroutines for every event, session events
// included; unlike the event channel it never drops one. It must not block
// and must not call the connection.
func (s *Session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		s.m.connected.Set(1)
		first := false
		s.firstOnce.Do(func() { first = true; close(s.hasSession) })
		if first || s.afterExp.Swap(false) {
			s.m.sessions.Inc()
			if !first {
				s.log.Info("zookeeper: new session after expiry", "server", ev.Server)
			}
		} else {
			s.log.Debug("zookeeper: reconnected, session kept", "server", ev.Server)
		}
	case zk.StateDisconnected:
		s.m.connected.Set(0)
		s.log.Debug("zookeeper: disconnected", "server", ev.Server)
	case zk.StateExpired:
		s.m.expiries.Inc()
		s.afterExp.Store(true)
		s.log.Warn("zookeeper: session expired; ephemeral nodes and watches are gone, recreating")
		s.mu.Lock()
		close(s.expired)
		s.expired = make(chan struct{})
		s.mu.Unlock()
	}
}

// Expired returns a channel that is closed when the session that is current
// (or, between an expiry and the next session, the next one) expires. Call
// it again after it fires to follow the new session.
func (s *Session) Expired() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// Connected reports whether the connection has a session now: false while
// go-zookeeper is reconnecting (the ensemble unreachable) or after an expiry
// until the next session.
func (s *Session) Connected() bool { return s.conn.State() == zk.StateHasSession }

// Done is closed once Close has been called.
func (s *Session) Done() <-chan struct{} { return s.closed }

// Close ends the session (its ephemeral nodes go at once) and stops the
// loops of this package that use it. It is safe to call more than once.
func (s *Session) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.conn.Close()
		s.m.connected.Set(0)
	})
}

// zkLogger sends go-zookeeper's log lines to slog at Debug: it logs every
// reconnect attempt, and this package logs what matters itself.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if z.l.Enabled(context.Background(), slog.LevelDebug) {
		z.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
	}
}
