package detector

import (
	"context"
	"time"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
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
// Send is called once per flush round, with no counts when there is
// nothing to forward (a liveness signal). It returns once the counts are
// handed on. Run commits the offsets of the records behind them only after
// Send returned nil; on an error it retries the same counts (same Flush)
// with backoff and never commits past them. counts is reused after Send
// returns: keep the Count values (their strings are immutable), not the
// slice; so is f.Weights. Send is called from one goroutine at a time.
type Sink interface {
	Send(ctx context.Context, f Flush, counts []Count) error
}

// Source is membership in the consumer group on the access topics. The
// default Source is Kafka (internal/kafkaio); tests supply fakes.
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
// rebalance to the next.
type Generation interface {
	// Claims opens a reader for each partition assigned to this member, at
	// the group's committed offset, or at the partition's offset in from
	// when that is later. from holds, per partition, the offset after the
	// records whose counts this member handed on in earlier generations: a
	// commit lost with its coordinator (a broker restart) then does not make
	// the member count those records again.
	Claims(from map[TopicPartition]int64) []Claim
	// Start runs fn in a goroutine tied to the generation: ctx is done when
	// the generation ends, and the group does not move on until fn returned.
	Start(fn func(ctx context.Context))
	// Commit stores, per partition, the offset of the next record to read.
	Commit(ctx context.Context, offsets map[TopicPartition]int64) error
}

// TopicPartition names one partition of one of the topics the detector
// reads.
type TopicPartition struct {
	Topic     string
	Partition int
}

// Claim reads one partition. It is used by one goroutine.
type Claim interface {
	Topic() string
	Partition() int
	// Fetch returns the next record. When ctx ends first it returns an error
	// and loses no record: the next Fetch returns it. An error that wraps
	// ErrRewound says that the partition's log was replaced and the Claim
	// reads the new one from its start.
	Fetch(ctx context.Context) (Record, error)
	Close() error
}

// ErrRewound is returned, wrapped, by Claim.Fetch when the partition's log no
// longer holds the claim's position (its topic was deleted and created
// again, or the log cut back) and the claim moved back to read what the log
// holds now. The offsets read before mean nothing for the new log: the
// detector commits and hands on the new log's offsets even though they are
// lower.
var ErrRewound = kafkaio.ErrRewound

// Record is one record of a partition.
type Record struct {
	Value         []byte // valid until the next Fetch
	Offset        int64
	HighWaterMark int64     // the offset the partition's next record will get, as of the fetch; 0 if unknown
	Time          time.Time // the record's timestamp; zero if unknown
}
