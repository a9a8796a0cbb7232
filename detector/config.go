package detector

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/access"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Config configures a Detector. A zero field means the default shown.
type Config struct {
	// Source is the detector's membership in the consumer group on the
	// access topics (internal/kafkaio's Source for Kafka); required.
	Source Source
	// Inputs say how the records of each topic decode; a topic not listed
	// (every topic, without Inputs) holds access events (docs/wire.md).
	Inputs []Input

	Window time.Duration // 1s: the window of the local rate the filter looks at
	// MaxAge is how old an entry's event time may be, by this process's
	// clock when it is read, to be counted (2 × Window): an older one is
	// out of every aggregator's window already, which ends at most a
	// Window behind the clock, so a replayed backlog never makes a key hot
	// now. A younger one may be late (held up in a producer while a
	// partition's leader moved) and still belongs to the window the
	// aggregators are about to read. Negative counts every entry, however
	// old.
	MaxAge time.Duration
	Bucket time.Duration // 100ms: the window slides by this step; must divide Window
	Flush  time.Duration // 100ms: how often partial counts go to the Sink
	// CommitInterval is how often the rounds' offsets are committed, at
	// most once per Flush. A generation's last round is always committed,
	// and so is a round fenced after a standstill. Every commit is a log
	// append on the broker, its costliest request here. A crashed or
	// frozen member's partitions are read again from the last commit, but
	// only once the group has dropped it, Takeover after it last read: so
	// by default (0) offsets are committed every second when MaxAge is
	// shorter than Takeover, as the records read again are then too old to
	// be counted, and every round otherwise (docs/detector.md, "Offsets and
	// commits").
	CommitInterval time.Duration
	// Takeover is how long after a member last read its partitions wait
	// for their next owner when it crashes or freezes: for a Kafka group,
	// the session timeout less a heartbeat (internal/kafkaio's
	// Source.Takeover). 0 means 9s, a Kafka group's with its default
	// timing (10s, 1s). It only sets CommitInterval's default.
	Takeover time.Duration

	// StallHold is how long a partition whose records stopped coming holds
	// the detector's reach (5s): one that had counts round after round
	// and then has none for twice its usual gap is taken to be late, not
	// empty (its leader moved, or its producers' writes wait for the
	// in-sync replicas), and the aggregators wait for it instead of
	// reading its share of every key as missing. Past StallHold its
	// traffic is taken to have stopped. Negative never holds
	// (docs/detector.md, "Stalled partitions").
	StallHold time.Duration

	// Threshold is the hot-key rate, in accesses per second (1000); the
	// filter's cutoff is derived from it. With Window it is the default
	// rule that SetRules weighs an app's rules against.
	Threshold float64
	// Alpha is the share of Threshold the filter may lose per key, all
	// detectors together (0.05). A key's accesses on one partition are
	// forwarded once its local count over Window+Bucket reaches
	// Alpha*Threshold*Window/(D*P), P being this detector's partitions.
	// A negative Alpha turns the filter off: every access is forwarded.
	Alpha float64
	// Detectors returns the current number of detectors D. It is called
	// once per flush, so it must be cheap. Nil means the number of members
	// registered through Membership, or 1 without Membership. If it reports
	// fewer detectors than there are, the loss bound grows in proportion.
	Detectors func() int

	// Membership, when set, registers this detector as ID (required with
	// it) at Addr under hotset.DetectorsDir(Root) while Run runs, and
	// counts the registered detectors for Detectors. Root "" means
	// hotset.DefaultRoot.
	Membership Membership
	Root       string
	ID         string
	Addr       string // host:port others reach this process at; informative

	// MaxKeys caps the keys tracked by the detector, all partitions
	// together (1<<19 = 524288); each of P partitions gets MaxKeys/P.
	// The counters hold at most about 300 bytes per key plus the key
	// bytes; docs/detector.md gives the whole bound.
	MaxKeys int
	// MaxKeyBytes caps the bytes of the keys tracked (app and key), all
	// partitions together (32 MiB).
	MaxKeyBytes int
	// MaxKeyLen is the longest key or app name accepted, in bytes
	// (access.DefaultMaxKeyLen, 1024); longer ones are rejected as invalid.
	MaxKeyLen int

	// SendTimeout is how long the Sink may keep failing before the
	// detector reports itself unhealthy (Detector.Healthy) (30s). It keeps
	// retrying the same counts, committing nothing past them, until the
	// Sink takes them, the generation ends (the partitions' next owner
	// reads them again) or Run is canceled; on cancel it tries for at most
	// 5s (or SendTimeout if shorter) more.
	SendTimeout time.Duration

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are not exported

	fenceAfter time.Duration // the gap between rounds that fences one (fenceGap); tests set it lower
}

// Input is one topic the detector reads.
type Input struct {
	Topic string
	// Decoder returns a decoder of the topic's records; it is called once
	// per partition read, and each decoder is used by one goroutine. Nil
	// means access events (docs/wire.md), whose bad records are counted in
	// hotspot_events_invalid_total.
	Decoder func() Decoder
}

// Decoder turns one record's value into accesses, calling fn for each; the
// Entry is valid during the call only (package access says what an Entry
// promises). It counts what it rejects itself and returns the first error,
// if any, for the debug log. internal/wire's Decoder, which reads the
// formats of docs/wire.md, is one.
type Decoder interface {
	Decode(value []byte, fn func(*access.Entry)) error
}

// Defaults not expressed inline.
const (
	DefaultMaxKeys     = 1 << 19
	DefaultMaxKeyBytes = 32 << 20
	DefaultAlpha       = 0.05
	DefaultThreshold   = 1000
	DefaultTakeover    = 9 * time.Second
)

func (cfg Config) withDefaults() (Config, error) {
	for i, in := range cfg.Inputs {
		if in.Topic == "" || slices.ContainsFunc(cfg.Inputs[:i], func(o Input) bool { return o.Topic == in.Topic }) {
			return cfg, fmt.Errorf("detector: input %d: topic %q empty or read twice", i, in.Topic)
		}
	}
	cfg.Window = cmp.Or(cfg.Window, time.Second)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, 2*cfg.Window)
	cfg.Bucket = cmp.Or(cfg.Bucket, 100*time.Millisecond)
	cfg.Flush = cmp.Or(cfg.Flush, 100*time.Millisecond)
	cfg.StallHold = cmp.Or(cfg.StallHold, 5*time.Second)
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = time.Second
		if cfg.MaxAge < 0 || cfg.MaxAge >= cmp.Or(cfg.Takeover, DefaultTakeover) {
			cfg.CommitInterval = cfg.Flush
		}
	}
	cfg.Threshold = cmp.Or(cfg.Threshold, DefaultThreshold)
	cfg.Alpha = cmp.Or(cfg.Alpha, DefaultAlpha)
	cfg.MaxKeys = cmp.Or(cfg.MaxKeys, DefaultMaxKeys)
	cfg.MaxKeyBytes = cmp.Or(cfg.MaxKeyBytes, DefaultMaxKeyBytes)
	cfg.MaxKeyLen = cmp.Or(cfg.MaxKeyLen, wire.DefaultMaxKeyLen)
	cfg.SendTimeout = cmp.Or(cfg.SendTimeout, 30*time.Second)
	cfg.fenceAfter = cmp.Or(cfg.fenceAfter, fenceGap)
	cfg.Root = cmp.Or(cfg.Root, hotset.DefaultRoot)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Source == nil:
		return cfg, errors.New("detector: nil Source")
	case cfg.Window < 0 || cfg.Bucket < 0 || cfg.Flush < 0 || cfg.SendTimeout < 0 || cfg.CommitInterval < 0 || cfg.Takeover < 0:
		return cfg, errors.New("detector: negative Window, Bucket, Flush, SendTimeout, CommitInterval or Takeover")
	case cfg.Bucket < time.Millisecond:
		return cfg, fmt.Errorf("detector: Bucket %v is below 1ms", cfg.Bucket)
	case cfg.Window%cfg.Bucket != 0:
		return cfg, fmt.Errorf("detector: Bucket %v does not divide Window %v", cfg.Bucket, cfg.Window)
	case cfg.Window/cfg.Bucket > 1000:
		return cfg, fmt.Errorf("detector: Window %v holds more than 1000 buckets of %v", cfg.Window, cfg.Bucket)
	case cfg.Threshold < 0:
		return cfg, errors.New("detector: negative Threshold")
	case cfg.MaxKeys < 0 || cfg.MaxKeyBytes < 0 || cfg.MaxKeyLen < 0:
		return cfg, errors.New("detector: negative MaxKeys, MaxKeyBytes or MaxKeyLen")
	case cfg.MaxKeys > 1<<31:
		return cfg, errors.New("detector: MaxKeys above 2^31")
	case cfg.Membership != nil && cfg.ID == "":
		return cfg, errors.New("detector: Membership needs an ID")
	case cfg.MaxKeyBytes < cfg.MaxKeyLen:
		return cfg, fmt.Errorf("detector: MaxKeyBytes %d below MaxKeyLen %d", cfg.MaxKeyBytes, cfg.MaxKeyLen)
	}
	return cfg, nil
}

// hotWeight is the filter weight of Threshold × d accesses (unit per access
// of an app without rules; an app with stricter rules weighs its accesses
// more, see weights.go), rounded up, at most 2^63.
func (cfg Config) hotWeight(d time.Duration) uint64 {
	w := math.Ceil(unit * cfg.Threshold * d.Seconds())
	if w >= 1<<63 {
		return 1 << 63
	}
	return uint64(w)
}

// windowShare is d detectors' and p partitions' share of a hot key's window
// (hotWeight(Window)), in filter weight, rounded up: the weight a key at
// the threshold rate reaches in one partition's window when its accesses
// spread evenly.
func (cfg Config) windowShare(d, p int) uint64 {
	w := cfg.hotWeight(cfg.Window)
	n := uint64(max(d, 1) * max(p, 1))
	return (w + n - 1) / n
}

// cutoff is the per-partition forwarding threshold, in filter weight over
// Window+Bucket (unit per access of an app without rules), for d detectors
// and p partitions on this one: the smallest integer >=
// unit*Alpha*Threshold*Window/(d*p), at most 2^32-1 (a bucket's weight
// saturates there). 0 turns the filter off. For an app without rules it
// forwards exactly the keys with at least Alpha*Threshold*Window/(d*p)
// accesses in the window, as a cutoff in accesses rounded up would.
func (cfg Config) cutoff(d, p int) uint64 {
	if cfg.Alpha < 0 {
		return 0
	}
	c := unit * cfg.Alpha * cfg.Threshold * cfg.Window.Seconds() / float64(max(d, 1)*max(p, 1))
	if c >= math.MaxUint32 {
		return math.MaxUint32
	}
	u := uint64(c)
	if float64(u) < c {
		u++
	}
	return u
}
