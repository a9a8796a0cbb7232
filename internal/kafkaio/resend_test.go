package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// refusing is a RoundTripper that fails every produce request while down
// with BrokerNotAvailable, the error of a layout naming a leader that is not
// among the live brokers, which kafka-go's Writer gives up on at its first
// attempt.
type refusing struct {
	kafka.RoundTripper
	down    atomic.Bool
	refused atomic.Int64
}

func (r *refusing) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if _, ok := req.(*produceapi.Request); ok && r.down.Load() {
		r.refused.Add(1)
		return nil, kafka.BrokerNotAvailable
	}
	return r.RoundTripper.RoundTrip(ctx, addr, req)
}

// TestResenderOutlivesAttempts, on the local broker: while every produce
// request fails for 2 s, far past the Writer's own attempts (2, with no
// retry of that error), records written meanwhile are handed over again and
// acknowledged once produce requests pass; each reaches Done once, with the
// WriterData it was written with. With RetryFor shorter than the outage,
// they are given up and Done gets the error.
func TestResenderOutlivesAttempts(t *testing.T) {
	broker := stacktest.Kafka(t)
	for _, tc := range []struct {
		retryFor  time.Duration
		delivered bool
	}{{10 * time.Second, true}, {500 * time.Millisecond, false}} {
		t.Run(fmt.Sprint(tc.retryFor), func(t *testing.T) {
			topic := stacktest.Name(t)
			if _, err := EnsureTopic(context.Background(), []string{broker}, topic, 2); err != nil {
				t.Fatal(err)
			}
			tr := &refusing{RoundTripper: (*Security)(nil).WriterTransport(topic)}
			var (
				mu   sync.Mutex
				done = map[int]error{}
				dups int
			)
			r := &Resender{RetryFor: tc.retryFor, Done: func(msgs []kafka.Message, err error) {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					i := m.WriterData.(int)
					if _, ok := done[i]; ok {
						dups++
					}
					done[i] = err
				}
			}}
			r.W = &kafka.Writer{Addr: kafka.TCP(broker), Topic: topic, Balancer: &kafka.RoundRobin{},
				RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, MaxAttempts: 2,
				WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 10 * time.Millisecond,
				Async: true, Completion: r.Completion, Transport: tr}
			// A first record learns the partitions.
			if err := r.Write(t.Context(), kafka.Message{Value: []byte("first"), WriterData: -1}); err != nil {
				t.Fatal(err)
			}
			tr.down.Store(true)
			const n = 50
			for i := range n {
				if err := r.Write(t.Context(), kafka.Message{Value: []byte(fmt.Sprint(i)), WriterData: i}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(2 * time.Second)
			tr.down.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			var failed int
			for i := range n {
				err, ok := done[i]
				switch {
				case !ok:
					t.Errorf("record %d: Done never called", i)
				case err != nil:
					failed++
				}
			}
			t.Logf("RetryFor %v: %d produce requests refused, %d records handed over again, %d of %d given up",
				tc.retryFor, tr.refused.Load(), r.Resent(), failed, n)
			if dups > 0 {
				t.Errorf("%d records reached Done twice", dups)
			}
			if r.Pending() != 0 {
				t.Errorf("%d records pending after Close", r.Pending())
			}
			switch {
			case tc.delivered && (failed > 0 || r.Resent() == 0):
				t.Errorf("%d records given up, %d handed over again; want every record delivered, after being handed over again", failed, r.Resent())
			case !tc.delivered && failed != n:
				t.Errorf("%d of %d records given up with RetryFor shorter than the outage, want all", failed, n)
			}
		})
	}
}

// TestResendable: errors that no retry mends are not resent; a broker's
// absence, a layout without a leader and timeouts are.
func TestResendable(t *testing.T) {
	for err, want := range map[error]bool{
		kafka.BrokerNotAvailable:                            true,
		kafka.NotEnoughReplicas:                             true,
		fmt.Errorf("wrapped: %w", kafka.LeaderNotAvailable): true,
		context.DeadlineExceeded:                            true,
		errors.New("no leader"):                             true,
		kafka.MessageSizeTooLarge:                           false,
		kafka.TopicAuthorizationFailed:                      false,
		fmt.Errorf("closed: %w", io.ErrClosedPipe):          false,
	} {
		if got := resendable(err); got != want {
			t.Errorf("resendable(%v) = %v, want %v", err, got, want)
		}
	}
}
