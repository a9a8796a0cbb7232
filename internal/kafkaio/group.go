package kafkaio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// The group timing a zero GroupConfig field means.
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
)

// GroupConfig configures a Group. A zero field means the default shown.
type GroupConfig struct {
	Brokers []string // bootstrap addresses; required
	Topics  []string // the topics to consume, at least one, each once
	Group   string   // consumer group ID; required

	SessionTimeout    time.Duration // 10s: a member silent this long is dropped from the group
	RebalanceTimeout  time.Duration // 10s: how long a rebalance waits for members to rejoin
	HeartbeatInterval time.Duration // 1s; must be below SessionTimeout
	JoinGroupBackoff  time.Duration // 250ms: wait before rejoining after a failed join

	// FromOldest starts a partition that has no committed offset at its
	// oldest record. False (the default) starts it at the newest, like
	// Kafka's auto.offset.reset=latest.
	FromOldest bool

	MaxWait  time.Duration // 250ms: longest a fetch waits on an idle partition
	MaxBytes int           // 4 MiB: largest fetch response per partition

	// MinBytes is the least a fetch waits for before the broker answers it
	// (1: a fetch returns as soon as a record is there). A larger value
	// makes the broker hold a fetch until that many bytes arrived or
	// MaxWait passed: fewer fetch requests per record, at up to MaxWait of
	// added delay on a partition that gets records slowly.
	MinBytes int

	Logger *slog.Logger // kafka-go's own messages go here at debug level, a rebalance for changed partitions at info; nil discards

	// Registerer, if set, gets the group's request counters
	// (hotspot_kafka_*: fetches, fetched records and bytes, offset
	// commits). They are unregistered at Close.
	Registerer prometheus.Registerer

	Security *Security // TLS and SASL; nil means plaintext, unauthenticated
}

// Group is one member of a Kafka consumer group on its topics. It wraps
// kafka-go's ConsumerGroup: Next returns each generation (one per
// rebalance), whose partitions are read with a Reader each.
type Group struct {
	cfg    GroupConfig
	reader kafka.ReaderConfig // template for the partition readers
	start  int64              // where a partition without a committed offset starts: kafka.FirstOffset or kafka.LastOffset
	cg     *kafka.ConsumerGroup
	client *kafka.Client // offset commits and leaves, each bounded by its context
	// transport is client's, the Group's own: its connections are dropped
	// after a request failed on one (see resetOn).
	transport *kafka.Transport

	// clientID names this member's requests to the coordinator, so that
	// a description of the group tells this member's entries from the
	// others' (see leaveLater). Unique per Group.
	clientID string
	retryFor time.Duration // retryFor, but in tests
	member   string        // member ID of the last generation; only Next touches it
	joined   chan struct{} // closed by Next when a generation arrives: the leaver stops; only Next touches it
	done     chan struct{} // closed by Close: leavers stop
	leavers  sync.WaitGroup
	once     sync.Once
	stats    *clientStats // nil without a Registerer
}

// NewGroup checks cfg and joins the group in the background. Join errors are
// reported by Next, once joins have kept failing for 10 s.
func NewGroup(cfg GroupConfig) (*Group, error) {
	g, gc, err := build(cfg)
	if err != nil {
		return nil, err
	}
	cg, err := kafka.NewConsumerGroup(gc)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: consumer group: %w", err)
	}
	g.cg = cg
	g.done = make(chan struct{})
	// The transport refreshes its cluster layout on a timer, at a random
	// time below kafka-go's 6 s: about the group's topics only, not every
	// topic of the cluster (its requests, commits, offsets and the
	// partition watch, need no other).
	g.transport = &kafka.Transport{ClientID: g.clientID, MetadataTopics: cfg.Topics}
	if cfg.Security != nil {
		g.transport.TLS, g.transport.SASL = cfg.Security.TLS, cfg.Security.SASL
	}
	g.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: g.transport}
	if cfg.Registerer != nil {
		g.stats = newClientStats()
		if err := cfg.Registerer.Register(g.stats); err != nil {
			_ = cg.Close()
			return nil, fmt.Errorf("kafkaio: register metrics: %w", err)
		}
	}
	return g, nil
}

// Check reports whether cfg is valid without contacting Kafka.
func Check(cfg GroupConfig) error {
	_, _, err := build(cfg)
	return err
}

func build(cfg GroupConfig) (*Group, kafka.ConsumerGroupConfig, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, kafka.ConsumerGroupConfig{}, err
	}
	log := cfg.Logger
	debug := kafka.LoggerFunc(func(msg string, args ...any) { log.Debug(fmt.Sprintf(msg, args...), "component", "kafka-go") })
	// A client ID of its own for each Group (kafka-go's default is the
	// same for every process of a binary on a host).
	clientID := fmt.Sprintf("hotspot-%s-%016x", cfg.Group, rand.Uint64())
	start := kafka.LastOffset
	if cfg.FromOldest {
		start = kafka.FirstOffset
	}
	gc := groupConfig(cfg, clientID, start, debug)
	// Validate fills in kafka-go's defaults on a copy; NewConsumerGroup
	// validates again, so this only catches errors early.
	check := gc
	if err := check.Validate(); err != nil {
		return nil, kafka.ConsumerGroupConfig{}, fmt.Errorf("kafkaio: consumer group config: %w", err)
	}
	rc := readerConfig(cfg, debug)
	// NewReader panics on a bad config: validate once, here.
	if err := rc.Validate(); err != nil {
		return nil, kafka.ConsumerGroupConfig{}, fmt.Errorf("kafkaio: reader config: %w", err)
	}
	return &Group{cfg: cfg, reader: rc, start: start, clientID: clientID, retryFor: retryFor}, gc, nil
}

// withDefaults checks cfg and fills in the defaults of its zero fields.
func withDefaults(cfg GroupConfig) (GroupConfig, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return cfg, errors.New("kafkaio: no brokers")
	case len(cfg.Topics) == 0:
		return cfg, errors.New("kafkaio: no topic")
	case cfg.Group == "":
		return cfg, errors.New("kafkaio: no group")
	}
	for i, topic := range cfg.Topics {
		if topic == "" || slices.Contains(cfg.Topics[:i], topic) {
			return cfg, fmt.Errorf("kafkaio: topic %q empty or given twice", topic)
		}
	}
	cfg.SessionTimeout = cmp.Or(cfg.SessionTimeout, DefaultSessionTimeout)
	cfg.RebalanceTimeout = cmp.Or(cfg.RebalanceTimeout, 10*time.Second)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.JoinGroupBackoff = cmp.Or(cfg.JoinGroupBackoff, 250*time.Millisecond)
	cfg.MaxWait = cmp.Or(cfg.MaxWait, 250*time.Millisecond)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, 4<<20)
	cfg.MinBytes = cmp.Or(cfg.MinBytes, 1)
	if cfg.HeartbeatInterval >= cfg.SessionTimeout {
		return cfg, fmt.Errorf("kafkaio: HeartbeatInterval %v must be below SessionTimeout %v",
			cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	if cfg.MaxWait < 0 || cfg.MaxBytes < 0 || cfg.MinBytes < 0 {
		return cfg, errors.New("kafkaio: negative MaxWait, MinBytes or MaxBytes")
	}
	if cfg.MinBytes > cfg.MaxBytes {
		return cfg, fmt.Errorf("kafkaio: MinBytes %d above MaxBytes %d", cfg.MinBytes, cfg.MaxBytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// groupConfig is kafka-go's consumer group configuration for cfg (with its
// defaults filled in).
func groupConfig(cfg GroupConfig, clientID string, start int64, debug kafka.Logger) kafka.ConsumerGroupConfig {
	dialer := cfg.Security.Dialer(10 * time.Second)
	dialer.ClientID = clientID
	return kafka.ConsumerGroupConfig{
		ID:                cfg.Group,
		Brokers:           cfg.Brokers,
		Topics:            cfg.Topics,
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  cfg.JoinGroupBackoff,
		// Not kafka-go's partition watcher: it ends every generation at
		// once while one of the topics does not exist, so a group with a
		// topic not created yet never stays formed. watchPartitions does
		// the same work without that.
		WatchPartitionChanges: false,
		StartOffset:           start,
		Logger:                debug,
		ErrorLogger:           debug,
		Dialer:                dialer,
	}
}

// readerConfig is the template of the partition readers' kafka-go
// configuration for cfg (with its defaults filled in); each Reader sets its
// topic and partition.
func readerConfig(cfg GroupConfig, debug kafka.Logger) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers: cfg.Brokers,
		Topic:   cfg.Topics[0], // each Reader sets its own
		// MinBytes 1 by default: a fetch returns as soon as any record is
		// there; with kafka-go's defaults the first fetch of a quiet
		// partition waits for seconds.
		MinBytes: cfg.MinBytes,
		MaxBytes: cfg.MaxBytes,
		MaxWait:  cfg.MaxWait,
		// Lag comes from each fetch's high-water mark; kafka-go's own lag
		// poller would cost a request per partition per minute.
		ReadLagInterval: -1,
		// A partition whose leader died is read again as soon as its new
		// leader serves it: kafka-go's default backoff grows to 1 s
		// between attempts, which came on top of the broker's failover
		// (docs/detector.md, "Broker restart").
		ReadBackoffMin: 50 * time.Millisecond,
		ReadBackoffMax: 250 * time.Millisecond,
		// A position past the end of the partition's log is reported to
		// Fetch (see beyondEnd) rather than retried until the log grows
		// past it, which would skip everything a recreated topic got.
		OffsetOutOfRangeError: true,
		Logger:                debug,
		ErrorLogger:           debug,
		Dialer:                cfg.Security.Dialer(10 * time.Second),
	}
}

// partitionWatch is how often each member asks for its topics' partitions;
// a request that failed is tried again after about partitionRetry (with
// jitter), so that no retry waits longer than a second while a broker is
// away.
const (
	partitionWatch = 5 * time.Second
	partitionRetry = time.Second
)

// jittered returns d moved by a random amount within ±20 %, so that the
// members of a group that failed together do not retry in step.
func jittered(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}

// watchPartitions returns, which ends the generation and starts a
// rebalance, once the number of partitions of one of the topics differs
// from what it was when the generation began; a topic that does not exist
// has none. So partitions added to a topic, a topic created after the
// group formed, and a topic deleted and created again (the brokers do it
// for a reader's metadata request, with their default number of
// partitions) are read from the next generation on, not from whenever the
// membership next changes.
func (g *Group) watchPartitions(ctx context.Context) {
	t := time.NewTimer(partitionWatch)
	defer t.Stop()
	var began map[string]int
	for {
		now, err := g.partitionCounts(ctx)
		wait := partitionWatch
		switch {
		case err != nil:
			g.cfg.Logger.Debug("kafkaio: partition watch", "group", g.cfg.Group, "err", err)
			wait = jittered(partitionRetry)
		case began == nil:
			began = now
		case !maps.Equal(now, began):
			g.cfg.Logger.Info("kafkaio: the topics' partitions changed; rebalancing", "group", g.cfg.Group,
				"before", began, "now", now)
			return
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// partitionCounts returns the number of partitions of each topic, 0 for a
// topic that does not exist. It does not make the brokers create a topic.
func (g *Group) partitionCounts(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := g.client.Metadata(ctx, &kafka.MetadataRequest{Topics: g.cfg.Topics})
	if err != nil {
		resetOn(g.transport, err)
		return nil, err
	}
	counts := make(map[string]int, len(g.cfg.Topics))
	for _, t := range md.Topics {
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			counts[t.Name] = 0
		case t.Error != nil:
			return nil, fmt.Errorf("topic %s: %w", t.Name, t.Error)
		default:
			counts[t.Name] = len(t.Partitions)
		}
	}
	return counts, nil
}

// retryFor is how long Next keeps retrying failed joins before it returns
// the error (Group.retryFor; tests shorten it).
const retryFor = 10 * time.Second

// Next blocks until the group hands this member its next generation. It
// never returns two live generations: the previous one has ended (and every
// function started on it has returned) before the next is returned.
//
// A failed join is retried after GroupConfig.JoinGroupBackoff, within Next:
// Next returns the error only when joins have kept failing for retryFor
// (10 s). kafka-go tries again only once its error has been taken, and
// holds a generation that formed until it is taken, so a caller that waits
// before calling Next again after an error (the detector waits 500 ms)
// would delay the rejoin after a broker restart by as much.
//
// After a failed join or a lost coordinator (a broker restart) kafka-go
// drops its member ID and joins as a new member; its LeaveGroup for the old
// ID fails while the coordinator is away. The restarted coordinator loads
// the group with the old member and holds the next rebalance until that
// member rejoins or its session times out (6 s and more), which it never
// does under its old ID. Next therefore hands the dropped ID to leaveLater,
// which removes it from the group once this member's new entry has joined.
func (g *Group) Next(ctx context.Context) (*Generation, error) {
	var failing time.Time // when the first join of this call failed
	for {
		gen, err := g.cg.Next(ctx)
		if err == nil {
			return g.generation(gen), nil
		}
		if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
			return nil, fmt.Errorf("kafkaio: next generation of group %s: %w", g.cfg.Group, err)
		}
		if !errors.Is(err, kafka.RebalanceInProgress) && g.member != "" {
			// kafka-go has dropped this member ID (it keeps it only
			// through RebalanceInProgress).
			if g.joined != nil {
				close(g.joined)
			}
			g.joined = make(chan struct{})
			g.leaveLater(g.member, g.joined)
			g.member = ""
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		if time.Since(failing) >= g.retryFor {
			return nil, fmt.Errorf("kafkaio: next generation of group %s: %w", g.cfg.Group, err)
		}
		g.cfg.Logger.Debug("kafkaio: join failed; trying again", "group", g.cfg.Group, "err", err)
	}
}

// generation wraps a generation kafka-go handed out; only Next calls it.
func (g *Group) generation(gen *kafka.Generation) *Generation {
	g.member = gen.MemberID
	if g.joined != nil {
		close(g.joined)
		g.joined = nil
	}
	out := &Generation{gen: gen, client: g.client, transport: g.transport, stats: g.stats, reader: g.reader, start: g.start}
	for _, topic := range g.cfg.Topics { // in the configured order
		for _, p := range gen.Assignments[topic] {
			out.parts = append(out.parts, Assignment{TopicPartition: TopicPartition{topic, p.ID}, Offset: p.Offset})
		}
	}
	gen.Start(g.watchPartitions)
	return out
}

// Close ends the current generation, waits for the functions started on it
// to return, and leaves the group. Later calls do nothing.
func (g *Group) Close() error {
	g.once.Do(func() { close(g.done) })
	if g.stats != nil {
		g.cfg.Registerer.Unregister(g.stats)
	}
	err := g.cg.Close()
	g.leavers.Wait()
	g.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("kafkaio: close group %s: %w", g.cfg.Group, err)
	}
	return nil
}

// resetOn drops the pooled connections of t when err is not an answer of
// the broker (a Kafka error code) but a failed connection or a timeout. A
// pool keeps its idle connections across a broker restart, and kafka-go
// hands each later request one of them, which fails at once (unexpected
// EOF), until they are used up: LeaveGroup was seen failing so for 1.3 s
// after the restarted broker answered. The next request dials anew.
func resetOn(t *kafka.Transport, err error) {
	var code kafka.Error
	if t != nil && err != nil && !errors.As(err, &code) {
		t.CloseIdleConnections()
	}
}

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int
}

// Assignment is one partition given to this member and the offset its
// reading starts at: the group's committed offset, or kafka.FirstOffset /
// kafka.LastOffset (negative) when none was committed.
type Assignment struct {
	TopicPartition
	Offset int64
}

// Generation is one assignment of partitions to this member, from one
// rebalance to the next.
type Generation struct {
	gen       *kafka.Generation
	client    *kafka.Client
	transport *kafka.Transport // client's
	stats     *clientStats
	reader    kafka.ReaderConfig
	start     int64 // the Group's
	parts     []Assignment
}

// ID is the generation number the coordinator assigned.
func (g *Generation) ID() int32 { return g.gen.ID }

// Assignments lists the partitions this member owns in the generation.
func (g *Generation) Assignments() []Assignment { return g.parts }

// Start runs fn in a goroutine tied to the generation: fn's ctx is done when
// the generation ends (a rebalance, a lost heartbeat, or Group.Close), and
// the group does not rejoin until fn has returned. When any fn returns, the
// generation ends, as in kafka-go.
func (g *Generation) Start(fn func(ctx context.Context)) { g.gen.Start(fn) }

// Commit stores offsets (partition -> offset of the next record to read) for
// the group, as a member of this generation. Offsets committed by an ended
// generation are refused.
//
// It does not use kafka-go's Generation.CommitOffsets: that call shares the
// coordinator connection with the group protocol, has no context, and on
// Kafka 4.1 blocks through a rebalance, so a member committing when a
// rebalance starts cannot end its generation in time and is evicted. Here
// the commit is a request of its own, bounded by ctx.
func (g *Generation) Commit(ctx context.Context, offsets map[TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	topics := make(map[string][]kafka.OffsetCommit)
	for p, o := range offsets {
		topics[p.Topic] = append(topics[p.Topic], kafka.OffsetCommit{Partition: p.Partition, Offset: o})
	}
	g.stats.committed()
	resp, err := g.client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID: g.gen.GroupID, GenerationID: int(g.gen.ID), MemberID: g.gen.MemberID, Topics: topics,
	})
	if err != nil {
		resetOn(g.transport, err)
		return fmt.Errorf("kafkaio: commit offsets of group %s: %w", g.gen.GroupID, err)
	}
	var errs []error
	for topic, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				errs = append(errs, fmt.Errorf("%s partition %d: %w", topic, p.Partition, p.Error))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafkaio: commit offsets of group %s: %w", g.gen.GroupID, errors.Join(errs...))
	}
	return nil
}

// Reader opens a reader of one assigned partition, positioned at a.Offset.
func (g *Generation) Reader(a Assignment) *Reader {
	rc := g.reader
	rc.Topic, rc.Partition = a.Topic, a.Partition
	r := &Reader{rc: rc, tp: a.TopicPartition, client: g.client, start: g.start, stats: g.stats}
	r.open(a.Offset)
	return r
}

// Record is one Kafka record of the partition.
type Record struct {
	Value         []byte
	Offset        int64
	Time          time.Time
	HighWaterMark int64 // offset the partition's next record will get, as of the fetch
}

// ErrRewound is returned, wrapped, by Reader.Fetch when the partition's log
// no longer holds the reader's position and the reader moved back to read
// what the log holds now: the topic was deleted and created again, or its
// log was cut back (an unclean leader election). Offsets read before it
// mean nothing for the log read after it.
var ErrRewound = errors.New("kafkaio: the partition's log was recreated or cut back")

// rewindAfter is how long a partition's log must keep ending before the
// reader's position before the reader moves back. Right after a leader
// change the new leader's end (its high-water mark) can trail the old
// leader's for a moment; a recreated topic's stays behind.
const rewindAfter = 5 * time.Second

// Reader reads one partition in offset order. It is not safe for concurrent use.
type Reader struct {
	r      *kafka.Reader
	rc     kafka.ReaderConfig // r's, to open another at a new position
	tp     TopicPartition
	client *kafka.Client // the Group's: the log's offsets by time
	start  int64         // the Group's start for a partition without a committed offset
	stats  *clientStats
	last   time.Time // the time of the last record read; zero before the first
	beyond time.Time // when the log was first found to end before the position; zero while it does not
}

// TopicPartition is the partition read.
func (r *Reader) TopicPartition() TopicPartition { return r.tp }

// Fetch returns the next record. When ctx ends first it returns ctx.Err()
// and no record is lost: the next Fetch returns it. An error that wraps
// ErrRewound says that the reader moved back to the start of a log that
// replaced the one it read.
func (r *Reader) Fetch(ctx context.Context) (Record, error) {
	for {
		m, err := r.r.FetchMessage(ctx)
		if err == nil {
			r.last, r.beyond = m.Time, time.Time{}
			return Record{Value: m.Value, Offset: m.Offset, Time: m.Time, HighWaterMark: m.HighWaterMark}, nil
		}
		if ctx.Err() != nil {
			return Record{}, ctx.Err()
		}
		if !errors.Is(err, kafka.OffsetOutOfRange) {
			return Record{}, fmt.Errorf("kafkaio: fetch %s partition %d: %w", r.tp.Topic, r.tp.Partition, err)
		}
		if err := r.beyondEnd(ctx); err != nil {
			return Record{}, err
		}
	}
}

// beyondEnd follows kafka-go's report that the partition's log ends before
// the reader's position; kafka-go's reader has stopped. Until the log has
// kept ending there for rewindAfter, it reads at the same position again
// after a short wait. Then it moves the reader to the first record written
// at or after the last one it read, or, if it read none (its position was
// handed on from the old log), where a partition without a committed offset
// starts, and returns an error that wraps ErrRewound.
func (r *Reader) beyondEnd(ctx context.Context) error {
	pos := r.r.Offset()
	now := time.Now()
	if r.beyond.IsZero() {
		r.beyond = now
	}
	if now.Sub(r.beyond) < rewindAfter {
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		r.reopen(pos)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	to, err := r.offsetAt(ctx, r.last)
	if err != nil {
		r.reopen(pos)
		return fmt.Errorf("kafkaio: fetch %s partition %d: the log ends before offset %d, and where to read on is unknown: %w",
			r.tp.Topic, r.tp.Partition, pos, err)
	}
	r.reopen(to)
	since := now.Sub(r.beyond).Round(time.Millisecond)
	r.beyond = time.Time{}
	return fmt.Errorf("kafkaio: fetch %s partition %d: the log has ended before offset %d for %v; reading on at offset %d: %w",
		r.tp.Topic, r.tp.Partition, pos, since, to, ErrRewound)
}

// offsetAt returns the offset of the log's first record written at or after
// t, or kafka.LastOffset when there is none; when t is zero, the Group's
// start.
func (r *Reader) offsetAt(ctx context.Context, t time.Time) (int64, error) {
	if t.IsZero() {
		return r.start, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kafka.TimeOffsetOf(r.tp.Partition, t)
	resp, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{r.tp.Topic: {req}}})
	if err != nil {
		t, _ := r.client.Transport.(*kafka.Transport)
		resetOn(t, err)
		return 0, err
	}
	ps := resp.Topics[r.tp.Topic]
	if len(ps) != 1 {
		return 0, fmt.Errorf("ListOffsets answered %d partitions for one", len(ps))
	}
	p := ps[0]
	if p.Error != nil {
		return 0, p.Error
	}
	for o := range p.Offsets { // one: -1 when no record is that recent
		if o >= 0 {
			return o, nil
		}
	}
	return kafka.LastOffset, nil
}

// open starts a kafka-go reader at offset (which may be kafka.FirstOffset or
// kafka.LastOffset).
func (r *Reader) open(offset int64) {
	r.r = kafka.NewReader(r.rc) // cannot panic: rc was validated in build (and its topic is one of cfg.Topics)
	_ = r.r.SetOffset(offset)   // fails only on a closed reader
	r.stats.open(r.r)
}

// reopen replaces the kafka-go reader, which stops for good once it reported
// a position out of range, with one at offset.
func (r *Reader) reopen(offset int64) {
	_ = r.Close()
	r.open(offset)
}

// Close stops the reader's background fetching.
func (r *Reader) Close() error {
	err := r.r.Close()
	r.stats.closed(r.r)
	return err
}
