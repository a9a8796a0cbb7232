package detector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Detector is one member of the detector consumer group. See the package
// doc for what it guarantees.
type Detector struct {
	cfg  Config
	sink Sink
	m    *metrics
	log  *slog.Logger

	weights atomic.Pointer[weightTable] // the filter weights of apps with rules; nil: none
	rulesMu sync.Mutex                  // serializes SetRules

	seq     atomic.Uint64         // the last Flush.Seq handed out
	health  atomic.Pointer[error] // nil, or why the Sink is failing
	members atomic.Int64          // detectors registered, with Config.Membership

	mu    sync.Mutex // guards fatal, handed and cadences
	fatal error      // the first error that stops Run
	// handed is, per partition, the offset after the records whose counts
	// this member handed on in the generations it has had (see
	// Generation.Claims).
	handed map[TopicPartition]int64
	// cadences are the partitions' cadences as the last generation left
	// them (see stalls), for the next one to go on with.
	cadences map[TopicPartition]*cadence
}

// Healthy returns nil, or an error when the Sink has refused the counts of
// a round for SendTimeout or longer and still does. Counting is stopped
// meanwhile; the detector keeps retrying and heals on the next success.
func (d *Detector) Healthy() error {
	if p := d.health.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *Detector) healthy(err error) {
	if err == nil {
		if d.health.Load() != nil {
			d.health.Store(nil)
			d.log.Info("detector: sink takes counts again")
		}
		return
	}
	if d.health.Swap(&err) == nil {
		d.log.Error("detector: unhealthy; retrying", "err", err)
	}
}

// New checks cfg and returns a Detector that sends to sink. It does not
// contact the Source; Run does.
func New(cfg Config, sink Sink) (*Detector, error) {
	if sink == nil {
		return nil, errors.New("detector: nil Sink")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Detector{cfg: cfg, sink: sink, m: newMetrics(cfg.Registerer), log: cfg.Logger}
	// Sequence numbers start at the start time in milliseconds: a restarted
	// process, flushing far less often than every millisecond, never reuses
	// one of its predecessor's.
	d.seq.Store(uint64(time.Now().UnixMilli()))
	if cfg.Membership != nil && cfg.Detectors == nil {
		d.cfg.Detectors = func() int { return max(1, int(d.members.Load())) }
	}
	return d, nil
}

// Run joins the group through Config.Source (and Config.Membership) and
// counts until ctx is canceled. Then it stops consuming, hands the counts in
// flight to the Sink, commits their offsets, leaves the group (closes the
// Source; and the membership) and returns nil. It returns an error only
// when the Sink refused the last counts for SendTimeout at shutdown
// (nothing past them is committed), leaving the group failed or the
// membership failed for good. A Sink that keeps failing
// while it runs makes the detector unhealthy (Healthy); Run goes on
// retrying. Run may be called once.
func (d *Detector) Run(ctx context.Context) error {
	src := d.cfg.Source
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	fail := func(err error) {
		d.mu.Lock()
		if d.fatal == nil {
			d.fatal = err
		}
		d.mu.Unlock()
		stop()
	}

	if d.cfg.Membership != nil {
		// Membership outlives the counting: the last flush still divides
		// by this detector, and the node goes once Run is done.
		memberCtx, leave := context.WithCancel(context.WithoutCancel(ctx))
		var mwg sync.WaitGroup
		mwg.Go(func() { d.member(memberCtx, fail) })
		defer func() { leave(); mwg.Wait() }()
	}

	var wg sync.WaitGroup
	for runCtx.Err() == nil {
		gen, err := src.Next(runCtx)
		if err != nil {
			if runCtx.Err() != nil {
				break
			}
			d.log.Warn("detector: waiting for a consumer group generation", "err", err)
			select {
			case <-runCtx.Done():
			case <-time.After(400*time.Millisecond + rand.N(200*time.Millisecond)): // jittered: members that failed together retry apart
			}
			continue
		}
		d.startGeneration(runCtx, gen, &wg, fail)
	}
	// Close ends the generation: its goroutines, which have already seen
	// runCtx end, finish their last flush and commit before the group is
	// left.
	closeErr := src.Close()
	wg.Wait()
	d.m.partitions.Set(0)
	d.m.keys.Set(0)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fatal != nil {
		return d.fatal
	}
	if closeErr != nil {
		return fmt.Errorf("detector: leaving the group: %w", closeErr)
	}
	return nil
}

// decoder returns a new decoder of topic's records; the effect reports of
// access events go to onEffect.
func (d *Detector) decoder(topic string, onEffect func(*wire.EffectEntry)) Decoder {
	for _, in := range d.cfg.Inputs {
		if in.Topic == topic && in.Decoder != nil {
			return in.Decoder()
		}
	}
	return &wire.Decoder{MaxKeyLen: d.cfg.MaxKeyLen, OnInvalid: func(e *wire.Error) { d.m.invalidFor(e.Reason).Inc() }, OnEffect: onEffect}
}

// startGeneration starts one worker per claimed partition and the flusher,
// all on gen so that the group waits for them before rebalancing further.
func (d *Detector) startGeneration(ctx context.Context, gen Generation, wg *sync.WaitGroup, fail func(error)) {
	d.mu.Lock()
	handed := maps.Clone(d.handed)
	d.mu.Unlock()
	claims := gen.Claims(handed)
	d.m.partitions.Set(float64(len(claims)))
	parts := make([]string, len(claims))
	for i, c := range claims {
		parts[i] = c.Topic() + "/" + strconv.Itoa(c.Partition())
	}
	if len(claims) == 0 {
		// More detectors than partitions, or the topic did not exist when
		// the group formed: its partitions, once there, end the generation
		// (kafkaio's partition watch).
		d.log.Warn("detector: no partition assigned")
		return
	}
	d.log.Info("detector: partitions assigned", "partitions", parts)
	f := newFlusher(d, gen, len(claims), fail)
	f.stalls.resume(d.cadencesOf(claims))
	for _, c := range claims {
		w := newWorker(d, c, len(claims), &f.current, f.partials, f.early)
		wg.Add(1)
		gen.Start(func(gctx context.Context) {
			defer wg.Done()
			w.run(gctx)
		})
	}
	wg.Add(1)
	gen.Start(func(gctx context.Context) {
		defer wg.Done()
		f.run(ctx, gctx)
	})
}

// forget drops what this member handed on of p: p's log was replaced.
func (d *Detector) forget(p TopicPartition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.handed, p)
}

// cadencesOf returns the cadences the last generation left of claims'
// partitions.
func (d *Detector) cadencesOf(claims []Claim) map[TopicPartition]*cadence {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := make(map[TopicPartition]*cadence, len(claims))
	for _, c := range claims {
		tp := TopicPartition{Topic: c.Topic(), Partition: c.Partition()}
		if cd := d.cadences[tp]; cd != nil {
			kept[tp] = cd
		}
	}
	return kept
}

// leftCadences keeps a generation's cadences for the next one.
func (d *Detector) leftCadences(parts map[TopicPartition]*cadence) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cadences = parts
}

// handedOn notes the offsets a generation's counts were handed on up to.
func (d *Detector) handedOn(offsets map[TopicPartition]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handed == nil {
		d.handed = make(map[TopicPartition]int64)
	}
	for p, o := range offsets {
		d.handed[p] = max(d.handed[p], o)
	}
}
