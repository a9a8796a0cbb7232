package hotcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
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
// a failed attempt, so the next one goes to the new leader. A batch the
// Writer gives up on (its attempts all failed, or an error it does not retry,
// such as a layout fetched mid-election that names no live leader) is handed
// to it again, every 250 ms, until the report buffer's retry time (60 s by
// default, WithReportBuffer) has passed since it was first handed over
// (kafkaio.Resender): a rolling restart of the brokers loses nothing. Only
// then, or for an error no retry mends, is it counted
// (reporter_failed_records_total). A partition's batches go out one after
// another, so a batch that retries holds back the ones behind it; the
// buffer's bytes (16 MiB by default) bound them all, and past it new batches
// are dropped and counted (reporter_dropped_accesses_total{reason="kafka"},
// reporter_dropped_effects_total), so the app never waits for Kafka.
const (
	reportAttempts   = 24
	reportBackoffMin = 50 * time.Millisecond
	reportBackoffMax = 250 * time.Millisecond
	// closeWait bounds how long close waits for the batches in flight
	// (retried ones included).
	closeWait = 10 * time.Second
)

// kafkaSink hands batches to an asynchronous kafka-go Writer. Records are not
// keyed (the writer spreads them round-robin over partitions), so a hot key
// never pins a partition.
type kafkaSink struct {
	w        *kafka.Writer
	r        *kafkaio.Resender
	buffer   int64        // bound of inflight, bytes
	inflight atomic.Int64 // bytes handed to w and not yet acknowledged or given up
	m        *metrics
	log      *slog.Logger
}

// newKafkaSink returns a sink writing to topic, which holds at most buffer
// bytes of records not yet acknowledged and retries each for retryFor.
func newKafkaSink(brokers []string, topic string, tr kafka.RoundTripper, buffer int64, retryFor time.Duration, m *metrics, log *slog.Logger) *kafkaSink {
	s := &kafkaSink{buffer: buffer, m: m, log: log}
	s.r = &kafkaio.Resender{RetryFor: retryFor, Done: s.completed,
		OnResend: func(n int) { m.reportResent.Add(float64(n)) }}
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
		Completion:      s.r.Completion,
		Transport:       tr,
	}
	s.r.W = s.w
	return s
}

func (s *kafkaSink) send(ctx context.Context, rec []byte) error {
	n := int64(len(rec))
	if s.inflight.Add(n) > s.buffer {
		s.inflight.Add(-n)
		return errBacklog
	}
	// Async WriteMessages returns at once, except for the first write to a
	// topic, which looks up its partitions: bound that when Kafka is down.
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.r.Write(ctx, kafka.Message{Value: rec}); err != nil {
		s.inflight.Add(-n)
		return fmt.Errorf("hotcache: report: %w", err)
	}
	return nil
}

// completed is the Resender's Done: the records are acknowledged, or given
// up after the retry time or for an error no retry mends.
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

// close waits for the batches in flight, retried ones included, closeWait at
// most, and closes the Writer: what is still in flight then is given up.
func (s *kafkaSink) close() error {
	deadline := time.Now().Add(closeWait)
	for s.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	left := s.inflight.Load()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := s.r.Close(ctx)
	switch {
	case left > 0:
		return fmt.Errorf("hotcache: close Kafka writer: %d bytes of reports still unacknowledged after %v, given up", left, closeWait)
	case err != nil:
		return fmt.Errorf("hotcache: close Kafka writer: %w", err)
	}
	return nil
}
