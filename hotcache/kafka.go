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

// Delivery of the reports. A batch counts as delivered once every in-sync
// replica of its partition has it (acks=all: with min.insync.replicas=2 it is
// on two brokers at least, and survives the loss of one). A failed attempt is
// retried while kafka-go deems the error temporary (a leader change, too few
// in-sync replicas, a refused connection, a timeout), reportAttempts attempts
// in all with 50 and 200 ms and then 250 ms between them (5.5 s of waiting,
// so a batch goes out within 250 ms of its partition being served again); the
// Transport (kafkaio.WriterTransport) asks for the cluster layout again after
// a failed attempt, so the next one goes to the new leader. A batch whose
// attempts all failed is counted (reporter_failed_records_total). A
// partition's batches go out one after another, so a batch that retries
// holds back the ones behind it; maxInflight bounds them all, and past it new
// batches are dropped and counted, so the app never waits for Kafka.
const (
	reportAttempts   = 24
	reportBackoffMin = 50 * time.Millisecond
	reportBackoffMax = 250 * time.Millisecond
	// closeWait bounds how long close waits for the batches in flight
	// (kafka-go's Close waits for every retry of every one of them).
	closeWait = 10 * time.Second
)

// kafkaSink hands batches to an asynchronous kafka-go Writer. Records are not
// keyed (the writer spreads them round-robin over partitions), so a hot key
// never pins a partition.
type kafkaSink struct {
	w        *kafka.Writer
	inflight atomic.Int64 // bytes handed to w and not yet completed
	m        *metrics
	log      *slog.Logger
}

func newKafkaSink(brokers []string, topic string, tr kafka.RoundTripper, m *metrics, log *slog.Logger) *kafkaSink {
	s := &kafkaSink{m: m, log: log}
	s.w = &kafka.Writer{
		Addr:            kafka.TCP(brokers...),
		Topic:           topic,
		Balancer:        &kafka.RoundRobin{},
		BatchTimeout:    5 * time.Millisecond, // the default (1 s) would delay detection by a second
		RequiredAcks:    kafka.RequireAll,
		WriteTimeout:    2 * time.Second,
		MaxAttempts:     reportAttempts,
		WriteBackoffMin: reportBackoffMin,
		WriteBackoffMax: reportBackoffMax,
		Compression:     kafka.Lz4,
		Async:           true,
		Completion:      s.completed,
		Transport:       tr,
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

// close flushes the Writer and waits for its batches, closeWait at most:
// what is still in flight then is left to the Writer and lost if the process
// exits.
func (s *kafkaSink) close() error {
	done := make(chan error, 1)
	go func() { done <- s.w.Close() }()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hotcache: close Kafka writer: %w", err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("hotcache: close Kafka writer: %d bytes of reports still unacknowledged after %v, given up", s.inflight.Load(), closeWait)
	}
}
