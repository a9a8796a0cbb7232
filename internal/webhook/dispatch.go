package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// Headers of a delivery.
const (
	// SignatureHeader carries "sha256=" and the lower-case hex HMAC-SHA256
	// of the request body keyed with the subscription's secret; absent
	// when the subscription has none.
	SignatureHeader = "X-Hotspot-Signature-256"
	// DeliveryHeader identifies an event; a retry repeats it.
	DeliveryHeader = "X-Hotspot-Delivery"
	// EventHeader is the event's kind, "promoted" or "demoted".
	EventHeader = "X-Hotspot-Event"
)

// Event is the JSON body of a delivery.
type Event struct {
	V     int       `json:"v"` // 1
	App   string    `json:"app"`
	Key   string    `json:"key"`
	Kind  string    `json:"kind"` // "promoted" or "demoted"
	At    time.Time `json:"at"`   // when the shard decided it
	Rate  float64   `json:"rate"` // accesses per second over the window at the decision
	Rule  int       `json:"rule"` // -1: the default rule
	Shard string    `json:"shard"`
	// Sources are a promotion's busiest sources at the decision (at most
	// 8, busiest first, each with its share of the key's rate); absent
	// for demotions and when none were reported.
	Sources []decision.SourceShare `json:"sources,omitempty"`
}

// Sign returns the SignatureHeader value of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is the signature of body under secret, in
// constant time. Receivers written in Go can use it.
func Verify(secret string, body []byte, header string) bool {
	return hmac.Equal([]byte(header), []byte(Sign(secret, body)))
}

// Config tunes a Dispatcher. A zero field means its default.
type Config struct {
	Root        string        // ZooKeeper root; "" means hotset.DefaultRoot
	Shard       string        // id of the deciding shard, sent in every event
	Queue       int           // events waiting per subscription; 0 means 1000
	MaxAttempts int           // deliveries tried per event; 0 means 6
	Backoff     time.Duration // wait before the first retry, doubled after each; 0 means 200ms
	MaxBackoff  time.Duration // longest wait between retries; 0 means 30s
	Timeout     time.Duration // bound on one attempt, connect included; 0 means 5s
	Client      *http.Client  // nil: a client that follows no redirects

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
}

// Dispatcher delivers a shard's decisions to the subscriptions it follows
// in ZooKeeper. Record is safe for concurrent use; Run runs once.
type Dispatcher struct {
	sess   *zkgroup.Session
	cfg    Config
	log    *slog.Logger
	m      *metrics
	client *http.Client

	mu      sync.RWMutex         // guards byApp, senders and closed
	byApp   map[string][]*sender // app -> its subscriptions' senders
	senders map[string]*sender   // by subscription identity (app, name, url, secret)
	closed  bool                 // Run has ended: senders are stopping
	wg      sync.WaitGroup       // sender goroutines
}

// New returns a Dispatcher following the subscriptions under cfg.Root.
func New(sess *zkgroup.Session, cfg Config) (*Dispatcher, error) {
	if sess == nil {
		return nil, errors.New("webhook: nil session")
	}
	cfg.Root = cmp.Or(cfg.Root, hotset.DefaultRoot)
	cfg.Queue = cmp.Or(cfg.Queue, 1000)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 6)
	cfg.Backoff = cmp.Or(cfg.Backoff, 200*time.Millisecond)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, 30*time.Second)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Queue < 0 || cfg.MaxAttempts < 0 || cfg.Backoff < 0 || cfg.MaxBackoff < 0 || cfg.Timeout < 0 {
		return nil, errors.New("webhook: Queue, MaxAttempts, Backoff, MaxBackoff and Timeout must be >= 0")
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Dispatcher{sess: sess, cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer), client: client,
		byApp: map[string][]*sender{}, senders: map[string]*sender{}}, nil
}

// Run follows the subscriptions and delivers until ctx is canceled; then
// it stops every sender (what they still hold is counted undelivered) and
// returns nil. It returns an error only if the ZooKeeper session is closed
// or the root is unusable.
func (d *Dispatcher) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	err := d.sess.Watch(ctx, Dir(d.cfg.Root), func(nodes map[string][]byte) { d.apply(ctx, nodes) })
	stopped := ctx.Err() != nil
	d.mu.Lock()
	d.closed = true // from now on Record counts instead of queuing
	d.mu.Unlock()
	cancel()
	d.wg.Wait()
	if stopped {
		return nil
	}
	return fmt.Errorf("webhook: follow subscriptions: %w", err)
}

// apply starts a sender for every new subscription and stops the senders of
// subscriptions that are gone or changed.
func (d *Dispatcher) apply(ctx context.Context, nodes map[string][]byte) {
	want := map[string]*sender{}
	for name, data := range nodes {
		app, subs, err := Decode(data)
		if err == nil {
			var esc string
			if esc = hotset.Escape(app); esc != name {
				err = fmt.Errorf("node %s holds app %q", name, app)
			}
		}
		if err != nil {
			d.log.Warn("ignoring a webhook subscriptions node", "node", name, "err", err)
			continue
		}
		for _, s := range subs {
			if s.Check() != nil {
				continue // Store.Put checks; only a hand-written node gets here
			}
			id := app + "\x00" + s.Name + "\x00" + s.URL + "\x00" + s.Secret
			want[id] = &sender{app: app, sub: s}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, s := range d.senders {
		if want[id] == nil {
			s.removed.Store(true)
			s.cancel()
			delete(d.senders, id)
		}
	}
	byApp := map[string][]*sender{}
	for id, s := range want {
		if old := d.senders[id]; old != nil {
			s = old
		} else {
			d.start(ctx, s)
			d.senders[id] = s
		}
		byApp[s.app] = append(byApp[s.app], s)
	}
	d.byApp = byApp
	d.m.subs.Set(float64(len(d.senders)))
}

// Record queues each decision on every subscription of its app. It never
// blocks: a full queue drops the event and counts it.
func (d *Dispatcher) Record(ds []decision.Decision) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, dec := range ds {
		senders := d.byApp[dec.App]
		if len(senders) == 0 {
			continue
		}
		if d.closed {
			d.m.undelivered.WithLabelValues("shutdown").Add(float64(len(senders)))
			continue
		}
		body, err := json.Marshal(Event{V: 1, App: dec.App, Key: dec.Key, Kind: dec.Kind, At: dec.At.UTC(),
			Rate: dec.Rate, Rule: dec.Rule, Shard: d.cfg.Shard, Sources: dec.Sources})
		if err != nil { // cannot happen for these types; never lose it silently
			d.m.undelivered.WithLabelValues("failed").Add(float64(len(senders)))
			continue
		}
		dl := delivery{id: rand.Text(), kind: dec.Kind, at: dec.At, body: body}
		for _, s := range senders {
			select {
			case s.q <- dl:
			default:
				d.m.undelivered.WithLabelValues("queue_full").Inc()
			}
		}
	}
}

// delivery is one event on its way to one subscription.
type delivery struct {
	id   string
	kind string
	at   time.Time // the decision
	body []byte
}

// sender owns one subscription's queue and delivers it in order.
type sender struct {
	app     string
	sub     Subscription
	q       chan delivery
	cancel  context.CancelFunc
	removed atomic.Bool // stopped because the subscription went or changed
}

// reason is why s stopped, for the undelivered count.
func (s *sender) reason() string {
	if s.removed.Load() {
		return "removed"
	}
	return "shutdown"
}

// start runs s until it is stopped or ctx ends. The caller holds d.mu.
func (d *Dispatcher) start(ctx context.Context, s *sender) {
	s.q = make(chan delivery, d.cfg.Queue)
	ctx, s.cancel = context.WithCancel(ctx)
	d.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				// Record no longer reaches s: it was taken out of byApp,
				// or the dispatcher is closed, before ctx was canceled.
				d.m.undelivered.WithLabelValues(s.reason()).Add(float64(len(s.q)))
				return
			case dl := <-s.q:
				d.deliver(ctx, s, dl)
			}
		}
	})
}

// deliver POSTs dl to s until it succeeds, fails for good, or runs out of
// attempts.
func (d *Dispatcher) deliver(ctx context.Context, s *sender, dl delivery) {
	wait := d.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := d.post(ctx, s, dl)
		if err == nil {
			d.m.attempts.WithLabelValues("ok").Inc()
			d.m.delivered.Inc()
			d.m.delay.Observe(time.Since(dl.at).Seconds())
			return
		}
		d.m.attempts.WithLabelValues("error").Inc()
		if !retry || attempt >= d.cfg.MaxAttempts {
			d.m.undelivered.WithLabelValues("failed").Inc()
			d.log.Warn("webhook not delivered", "app", s.app, "subscription", s.sub.Name, "attempts", attempt, "err", err)
			return
		}
		// Full jitter over the upper half: receivers that failed together
		// do not retry in lockstep.
		t := time.NewTimer(wait/2 + time.Duration(randInt64(int64(wait/2)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			d.m.undelivered.WithLabelValues(s.reason()).Inc()
			return
		case <-t.C:
		}
		wait = min(2*wait, d.cfg.MaxBackoff)
	}
}

// post makes one attempt. It reports whether a failure is worth retrying:
// network errors, timeouts, 408, 429 and 5xx are; other answers are not.
func (d *Dispatcher) post(ctx context.Context, s *sender, dl delivery) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sub.URL, bytes.NewReader(dl.body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hotspot-webhook/1")
	req.Header.Set(DeliveryHeader, dl.id)
	req.Header.Set(EventHeader, dl.kind)
	if s.sub.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(s.sub.Secret, dl.body))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return true, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("receiver answered %s", resp.Status)
	default:
		return false, fmt.Errorf("receiver answered %s", resp.Status)
	}
}
