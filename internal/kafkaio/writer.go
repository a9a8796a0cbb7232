package kafkaio

import (
	"time"

	"github.com/segmentio/kafka-go"
)

// How kafka-go's Writer (v0.4.51) gets a batch across a partition leader
// change. It retries a failed batch, MaxAttempts attempts in all, sleeping
// attempt²·WriteBackoffMin, at most WriteBackoffMax, before retry number
// attempt, as long as the error is temporary: NotLeaderForPartition,
// LeaderNotAvailable, NotEnoughReplicas, RequestTimedOut, a timeout, a
// refused or reset connection, among others. No error makes it refresh its
// metadata: the Transport refreshes its cached cluster layout on a timer,
// after a random time below its MetadataTTL (6 s by default), and sends a
// partition's batches to the leader it last learned until then. A Writer
// over WriterTransport learns a new leader within WriterMetadataTTL.

// WriterMetadataTTL is the longest a WriterTransport keeps the cluster
// layout without asking again: how long a Writer may keep sending to a
// partition's old leader after a change.
const WriterMetadataTTL = 2 * time.Second

// WriterTransport returns a Transport of its own, with s's TLS and SASL (s
// may be nil), for a Writer of topic: it asks for the metadata of topic alone
// (a small request, however many topics the cluster holds) at random times
// at most WriterMetadataTTL apart. A Transport of its own also learns a
// topic created after another client of the process asked about it, which
// kafka-go's shared default one would not for up to 6 s.
func (s *Security) WriterTransport(topic string) *kafka.Transport {
	t := &kafka.Transport{MetadataTTL: WriterMetadataTTL, MetadataTopics: []string{topic}}
	if s != nil {
		t.TLS, t.SASL = s.TLS, s.SASL
	}
	return t
}
