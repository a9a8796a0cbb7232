package detector

import (
	"context"

	"github.com/hotspot-dev/hotspot/access"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// Count is one key's accesses since the previous flush. It is the partial
// count of the aggregators' contract (package shardapi), so that
// internal/shardclient's Client is a Sink.
type Count = shardapi.Count

// Flush describes one flush round's counts: when it ended, the event
// time its counts happened in and its sequence number (see shardapi.Flush).
type Flush = shardapi.Flush

// Sink receives each flush's partial counts.
//
// Send is called at least once per flush round, with no counts when there
// is nothing to forward (a liveness signal); when the round's counts came
// from disjoint stretches of event time (a partition lagging the others,
// or reading two producers' batches), once per stretch, oldest first, so
// that each Flush's weights are those of its counts. It returns once the
// counts are handed on. Run commits the offsets of the records behind them only after
// Send returned nil; on an error it retries the same counts (same Flush)
// with backoff and never commits past them. counts is reused after Send
// returns: keep the Count values (their strings are immutable), not the
// slice; so is f.Weights. Send is called from one goroutine at a time.
type Sink interface {
	Send(ctx context.Context, f Flush, counts []Count) error
}

// Source is membership in the consumer group on the access topics.
// internal/kafkaio's Source is the Kafka one, which hotspotd wires; tests
// supply fakes. The types its methods name are package access's (aliased
// below), so that a Source, in this module or outside it, need not import
// the detector.
type Source interface {
	// Next blocks until the group hands this member its next generation.
	// It returns ctx.Err() when ctx ends first. Other errors are transient:
	// Run logs them and calls Next again.
	Next(ctx context.Context) (Generation, error)
	// Close ends the current generation (its functions' ctx is done), waits
	// for the functions started on it to return, and leaves the group.
	Close() error
}

// Generation is one assignment of partitions to this member, from one
// rebalance to the next (see access.Generation).
type Generation = access.Generation

// TopicPartition names one partition of one of the topics the detector
// reads.
type TopicPartition = access.TopicPartition

// Claim reads one partition (see access.Claim). It is used by one
// goroutine.
type Claim = access.Claim

// ErrRewound is returned, wrapped, by Claim.Fetch when the partition's log no
// longer holds the claim's position (see access.ErrRewound).
var ErrRewound = access.ErrRewound

// Record is one record of a partition.
type Record = access.Record
