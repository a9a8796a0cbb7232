package kafkaio

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// Why an asynchronous kafka-go Writer needs a Resender to lose nothing to a
// rolling restart of the brokers. Its own retries are counted in attempts,
// not time (MaxAttempts, backoff at most WriteBackoffMax between them), and
// it retries only errors it deems temporary. A broker's restart takes longer
// than a few seconds of attempts when it is slow to stop or to catch up, and
// some of its errors are not deemed temporary at all: a cluster layout
// fetched in the middle of an election names no leader for a partition, or a
// leader that is not among the live brokers (BrokerNotAvailable), and the
// Writer gives the batch up at its first attempt. Under load on the clustered
// stack that lost 74 records (94,554 events) in one rolling restart (issue
// 41).
//
// A Resender hands the records of a batch that the Writer gave up on to it
// again, after ResendBackoff, for as long as RetryFor since each was first
// handed over; the Writer balances them afresh, so they may go to another
// partition (the records are not keyed). Records wait in the Writer's queues
// meanwhile, counted by the caller's own bound in bytes (the caller's buffer;
// what overflows it is the caller's to count). Only errors that no retry
// mends (a record too large, a write the brokers deny, a closed Writer) and
// records older than RetryFor are given up.

// DefaultRetryFor is how long a Resender retries a record by default: past a
// broker's restart (a controlled shutdown, a start that replays its log, and
// a new leader for each of its partitions) with room to spare.
const DefaultRetryFor = 60 * time.Second

// ResendBackoff is the wait between the Writer giving a batch up and its
// records being handed to it again.
const ResendBackoff = 250 * time.Millisecond

// resendTimeout bounds one handing over (the Writer looks the topic's
// partitions up on its first write; later ones return at once).
const resendTimeout = 2 * time.Second

// Resender hands the records an asynchronous kafka.Writer gave up on to it
// again (see above). Use its Write instead of the Writer's WriteMessages and
// its Completion as the Writer's Completion; Done is called once per record,
// when it is acknowledged (err nil) or given up (err the last error).
//
// A Resender keeps its own stamp in each Message's WriterData while the
// record is in flight; Done sees the WriterData the caller gave.
type Resender struct {
	// W is the Writer, asynchronous, whose Completion is r.Completion.
	W *kafka.Writer
	// RetryFor is how long after it was first handed over a record is
	// handed over again; 0 means DefaultRetryFor.
	RetryFor time.Duration
	// Done is called with the records of a batch once they are
	// acknowledged (err nil) or given up, from the Writer's goroutines.
	Done func(msgs []kafka.Message, err error)
	// OnResend, when set, is told how many records were handed over again
	// each time some are.
	OnResend func(records int)

	resent  atomic.Int64   // records handed over again
	pending atomic.Int64   // records handed over and not yet done
	resends sync.WaitGroup // resends waiting for their backoff
	closed  atomic.Bool
}

// stamp is what a Resender keeps in a Message's WriterData.
type stamp struct {
	first time.Time // when the record was first handed over
	t     time.Time // the Message's Time as given (the Writer overwrites a zero one)
	data  any       // the caller's WriterData
}

// Write hands msgs to the Writer; their outcome reaches Done. It fails, and
// Done is not called, only when the Writer refuses them at once (closed, or
// its first write cannot learn the topic's partitions before ctx ends).
func (r *Resender) Write(ctx context.Context, msgs ...kafka.Message) error {
	now := time.Now()
	for i := range msgs {
		msgs[i].WriterData = &stamp{first: now, t: msgs[i].Time, data: msgs[i].WriterData}
	}
	r.pending.Add(int64(len(msgs)))
	if err := r.W.WriteMessages(ctx, msgs...); err != nil {
		r.pending.Add(-int64(len(msgs)))
		unstamp(msgs)
		return err
	}
	return nil
}

// unstamp gives msgs back the WriterData their caller gave.
func unstamp(msgs []kafka.Message) {
	for i := range msgs {
		if s, ok := msgs[i].WriterData.(*stamp); ok {
			msgs[i].WriterData = s.data
		}
	}
}

// Completion is the Writer's Completion: it passes acknowledged records to
// Done and hands failed ones over again, or gives them up.
func (r *Resender) Completion(msgs []kafka.Message, err error) {
	if err == nil || !resendable(err) || r.closed.Load() {
		r.done(msgs, err)
		return
	}
	retryFor := r.RetryFor
	if retryFor <= 0 {
		retryFor = DefaultRetryFor
	}
	var again, expired []kafka.Message
	now := time.Now()
	for _, m := range msgs {
		if s, ok := m.WriterData.(*stamp); ok && now.Sub(s.first)+ResendBackoff < retryFor {
			// As a new record: the Writer refuses a Message that names a
			// topic when it has one of its own.
			again = append(again, kafka.Message{Key: m.Key, Value: m.Value, Headers: m.Headers, Time: s.t, WriterData: s})
		} else {
			expired = append(expired, m)
		}
	}
	if len(expired) > 0 {
		r.done(expired, err)
	}
	if len(again) == 0 {
		return
	}
	r.resends.Add(1)
	time.AfterFunc(ResendBackoff, func() {
		defer r.resends.Done()
		r.resend(again, err)
	})
}

// resend hands msgs, given up by the Writer with err, to it again.
func (r *Resender) resend(msgs []kafka.Message, err error) {
	if r.closed.Load() {
		r.done(msgs, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), resendTimeout)
	werr := r.W.WriteMessages(ctx, msgs...)
	cancel()
	if werr != nil {
		// Not taken (the Writer closed, or the partitions not learned in
		// time): the next Completion decides again, with this error.
		r.resends.Add(1)
		go func() {
			defer r.resends.Done()
			r.Completion(msgs, werr)
		}()
		return
	}
	r.resent.Add(int64(len(msgs)))
	if r.OnResend != nil {
		r.OnResend(len(msgs))
	}
}

func (r *Resender) done(msgs []kafka.Message, err error) {
	unstamp(msgs)
	r.pending.Add(-int64(len(msgs)))
	if r.Done != nil {
		r.Done(msgs, err)
	}
}

// Resent returns how many records were handed over again so far (a record
// handed over three times counts twice).
func (r *Resender) Resent() int64 { return r.resent.Load() }

// Pending returns how many records were handed over and are not done yet.
func (r *Resender) Pending() int64 { return r.pending.Load() }

// Close waits until every record handed over is done, or ctx ends, and then
// closes the Writer: records still retried then are given up (Done with
// io.ErrClosedPipe). It returns ctx's error when it ended first, else the
// Writer's Close error.
func (r *Resender) Close(ctx context.Context) error {
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	var waited error
	for r.pending.Load() > 0 && waited == nil {
		select {
		case <-ctx.Done():
			waited = ctx.Err()
		case <-tk.C:
		}
	}
	r.closed.Store(true)
	err := r.W.Close()
	r.resends.Wait()
	if waited != nil {
		return waited
	}
	return err
}

// resendable reports whether err, the Writer's last for a batch, may be
// mended by handing the batch over again: every error but those that no
// retry mends.
func resendable(err error) bool {
	if errors.Is(err, io.ErrClosedPipe) {
		return false
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidRecord,
			kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
			kafka.SASLAuthenticationFailed, kafka.InvalidRequiredAcks, kafka.UnsupportedVersion,
			kafka.InvalidTopic, kafka.UnsupportedForMessageFormat, kafka.UnsupportedCompressionType:
			return false
		}
	}
	var tooLarge kafka.MessageTooLargeError
	return !errors.As(err, &tooLarge)
}
