package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/semaphore"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
)

// kafkaSink writes records with an asynchronous kafka-go Writer, spread
// round-robin over the topic's partitions (never keyed by cache key). Bytes
// written and not yet acknowledged are bounded by a semaphore (MaxInflight),
// so a slow broker slows the generator down (Write blocks) instead of
// queueing without bound; Stats.MaxLag then shows it. A batch the Writer
// gives up on is handed to it again for kafkaio.DefaultRetryFor (60 s) after
// its records were first written (kafkaio.Resender): a rolling restart of
// the brokers loses nothing. Its records keep their bytes in the semaphore
// meanwhile.
type kafkaSink struct {
	w        *kafka.Writer
	r        *kafkaio.Resender
	inflight *semaphore.Weighted
	max      int64
	msgs     []kafka.Message // reused: kafka-go copies each Message it is given
	failRecs atomic.Int64
	failEvts atomic.Int64
	log      *slog.Logger
}

func newKafkaSink(c Config) (*kafkaSink, error) {
	codec, err := compression(c.Compression)
	if err != nil {
		return nil, err
	}
	chunk := 1
	if c.Form == FormJSON || c.Form.lines() && c.Lines == 1 {
		// A record per event: keep runs of them on one partition so that
		// kafka-go's per-partition batches fill up.
		chunk = 32
	}
	s := &kafkaSink{inflight: semaphore.NewWeighted(c.MaxInflight), max: c.MaxInflight, log: c.Logger}
	s.r = &kafkaio.Resender{Done: s.completed}
	s.w = &kafka.Writer{
		Addr:         kafka.TCP(c.Brokers...),
		Topic:        c.Topic,
		Balancer:     &kafka.RoundRobin{ChunkSize: chunk},
		BatchTimeout: cmp.Or(c.BatchTimeout, 5*time.Millisecond), // kafka-go's default (1 s) would delay every record by a second
		BatchSize:    10_000,                                     // messages per partition batch; BatchBytes is the real bound
		BatchBytes:   1 << 20,                                    // under the broker's default message.max.bytes
		// Acknowledged by every in-sync replica: fire-and-forget loses
		// records silently, acks=1 loses those the leader had not passed on
		// when it died.
		RequiredAcks: kafka.RequireAll,
		// Across a leader change: 32 attempts, 50 and 200 ms, then 250 ms
		// apart (7.5 s of waiting), while the Transport asks for the
		// cluster layout again after each failed attempt: a batch goes out
		// within 250 ms of its partition being served again (a backoff
		// growing to 1 s added up to a second to detection after a
		// broker's death). Past them, or after an error the Writer does
		// not retry, the Resender hands the batch over again.
		MaxAttempts:     32,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: 250 * time.Millisecond,
		WriteTimeout:    10 * time.Second,
		Compression:     codec,
		Async:           true,
		Completion:      s.r.Completion,
		Transport:       c.Kafka.WriterTransport(c.Topic),
	}
	s.r.W = s.w
	return s, nil
}

func compression(name string) (kafka.Compression, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("loadgen: unknown compression %q (want none, gzip, snappy, lz4 or zstd)", name)
}

func (s *kafkaSink) weight(m *kafka.Message) int64 { return min(int64(len(m.Value)), s.max) }

// Write hands recs to the Writer, waiting while too many bytes are in flight.
func (s *kafkaSink) Write(ctx context.Context, recs []Record) error {
	for len(recs) > 0 {
		// Take the longest prefix that fits the in-flight budget at once.
		var w int64
		s.msgs = s.msgs[:0]
		for _, r := range recs {
			m := kafka.Message{Value: r.Value}
			if r.TimeMs > 0 {
				m.Time = time.UnixMilli(r.TimeMs)
			}
			if r.Events != 1 {
				m.WriterData = r.Events // read back by completed; nil means 1
			}
			if len(s.msgs) > 0 && w+s.weight(&m) > s.max {
				break
			}
			w += s.weight(&m)
			s.msgs = append(s.msgs, m)
		}
		recs = recs[len(s.msgs):]
		if err := s.inflight.Acquire(ctx, w); err != nil {
			return fmt.Errorf("loadgen: wait for Kafka: %w", err)
		}
		if err := s.r.Write(ctx, s.msgs...); err != nil {
			s.inflight.Release(w)
			return fmt.Errorf("loadgen: write to Kafka: %w", err)
		}
	}
	return nil
}

// completed is the Resender's Done, called once per record: acknowledged,
// or given up (RetryFor past, or an error no retry mends).
func (s *kafkaSink) completed(msgs []kafka.Message, err error) {
	var w, events int64
	for i := range msgs {
		w += s.weight(&msgs[i])
		if n, ok := msgs[i].WriterData.(int64); ok {
			events += n
		} else {
			events++
		}
	}
	s.inflight.Release(w)
	if err != nil {
		if s.failRecs.Add(int64(len(msgs))) == int64(len(msgs)) {
			s.log.Warn("loadgen: Kafka write failed (further failures are only counted)", "records", len(msgs), "err", err)
		}
		s.failEvts.Add(events)
	}
}

func (s *kafkaSink) Failed() (records, events int64) { return s.failRecs.Load(), s.failEvts.Load() }

// produceRequests returns the produce requests sent since the last call
// (kafka-go resets its counters when read).
func (s *kafkaSink) produceRequests() int64 { return s.w.Stats().Writes }

// Close waits for every record to be acknowledged or given up (the
// Resender's RetryFor and a margin at most), then closes the Writer.
func (s *kafkaSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaio.DefaultRetryFor+10*time.Second)
	defer cancel()
	err := s.r.Close(ctx)
	if n := s.r.Resent(); n > 0 {
		s.log.Info("loadgen: records handed to Kafka again after the writer gave them up", "records", n)
	}
	if err != nil {
		return fmt.Errorf("loadgen: close Kafka writer: %w", err)
	}
	return nil
}
