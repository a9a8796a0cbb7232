package hotcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

var errBacklog = errors.New("hotcache: Kafka backlog full")

// kafkaSink hands batches to an asynchronous kafka-go Writer. Records are not
// keyed (the writer spreads them round-robin over partitions), so a hot key
// never pins a partition.
type kafkaSink struct {
	w        *kafka.Writer
	inflight atomic.Int64 // bytes handed to w and not yet completed
	m        *metrics
	log      *slog.Logger
}

func newKafkaSink(brokers []string, topic string, m *metrics, log *slog.Logger) *kafkaSink {
	s := &kafkaSink{m: m, log: log}
	s.w = &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.RoundRobin{},
		BatchTimeout: 5 * time.Millisecond, // the default (1 s) would delay detection by a second
		RequiredAcks: kafka.RequireOne,
		WriteTimeout: 2 * time.Second,
		MaxAttempts:  2,
		Compression:  kafka.Lz4,
		Async:        true,
		Completion:   s.completed,
	}
	return s
}

func (s *kafkaSink) send(ctx context.Context, rec []byte) error {
	n := int64(len(rec))
	if s.inflight.Add(n) > maxInflight {
		s.inflight.Add(-n)
		return errBacklog
	}
	// Async WriteMessages returns at once, except for the first write to a
	// topic, which looks up its partitions: bound that when Kafka is down.
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.w.WriteMessages(ctx, kafka.Message{Value: rec}); err != nil {
		s.inflight.Add(-n)
		return fmt.Errorf("hotcache: report: %w", err)
	}
	return nil
}

func (s *kafkaSink) completed(msgs []kafka.Message, err error) {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.Value))
	}
	s.inflight.Add(-n)
	if err != nil {
		s.m.reportFailed.Add(float64(len(msgs)))
		s.log.Debug("hotcache: report batch failed", "records", len(msgs), "err", err)
	}
}

func (s *kafkaSink) close() error {
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("hotcache: close Kafka writer: %w", err)
	}
	return nil
}
