package access

import (
	"context"
	"errors"
	"time"
)

// The types below are what a detector's Source hands it (package detector
// declares Source and names these through aliases): one Generation of a
// consumer group per rebalance, a Claim per partition it was given, and the
// Records a Claim reads. They live here so that a source, in this module
// (internal/kafkaio) or outside it, implements detector.Source without
// importing the detector.

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
var ErrRewound = errors.New("access: the partition's log was recreated or cut back")

// Record is one record of a partition.
type Record struct {
	Value         []byte // valid until the next Fetch
	Offset        int64
	HighWaterMark int64     // the offset the partition's next record will get, as of the fetch; 0 if unknown
	Time          time.Time // the record's timestamp; zero if unknown
}
