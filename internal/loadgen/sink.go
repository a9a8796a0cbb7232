package loadgen

import (
	"context"
	"fmt"
	"time"
)

// Record is one record value handed to a Sink.
type Record struct {
	Value  []byte // the record value; the generator never touches it again
	Events int64  // accesses it carries: the sum of its entries' counts
	// TimeMs is the record's Kafka timestamp, Unix ms: the time of its
	// accesses for FormCombined and FormMappedJSON (whose input files may
	// read it, as operators' do); 0 lets the writer stamp it when it sends
	// it (the other forms carry their time in the value).
	TimeMs int64
}

// Sink receives the generator's records. Run calls Write from one goroutine,
// once per tick that produced records, and Close once at the end.
type Sink interface {
	// Write hands records over. It may return before they are delivered,
	// and may block to apply back-pressure. An error ends the run.
	Write(ctx context.Context, recs []Record) error
	// Failed reports the records, and the events they carried, that were
	// written but whose delivery failed so far. It may be called at any time.
	Failed() (records, events int64)
	// Close delivers what is pending and releases the Sink.
	Close() error
}

// Stats describes a run. Events, Records, Entries and Bytes count what was
// handed to the Sink.
type Stats struct {
	Elapsed time.Duration // wall-clock time from the run's start to the last tick handed to the Sink
	Drain   time.Duration // time the Sink took to deliver what was pending and close
	Events  int64         // accesses
	Records int64         // Kafka records
	Entries int64         // JSON objects or binary (key, count) entries
	Bytes   int64         // bytes of record values
	// EarlyRecords counts the records sent early (Config.EarlyCount).
	EarlyRecords int64

	// ProduceRequests is how many produce requests the Kafka writer sent
	// (kafka-go's WriterStats.Writes: one per partition batch); 0 with a
	// Sink of the caller's. Set only in Run's result.
	ProduceRequests int64

	FailedRecords int64 // records whose delivery failed
	FailedEvents  int64 // events in those records

	// MaxLag is the furthest the generator fell behind its schedule (a tick
	// generated this late after its end). Above a few ticks, the machine or
	// the Sink could not keep up, and records left late.
	MaxLag time.Duration

	Truth *Truth // the ground truth; set only in Run's result
}

// PerSecond returns n per second of Elapsed, e.g. s.PerSecond(s.Events) for
// the achieved event rate.
func (s Stats) PerSecond(n int64) float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(n) / s.Elapsed.Seconds()
}

// Progress is the line a progress report prints for the interval from prev
// to s (Config.Progress hands over one a second): the rates over it, the
// failures and the lag; "" when no time passed.
func (s Stats) Progress(prev Stats) string {
	d := (s.Elapsed - prev.Elapsed).Seconds()
	if d <= 0 {
		return ""
	}
	per := func(a, b int64) float64 { return float64(a-b) / d }
	return fmt.Sprintf("%7s  events %9.0f/s  records %8.0f/s  entries %9.0f/s  %7.2f MB/s  failed %d  lag %v\n",
		s.Elapsed.Round(time.Second), per(s.Events, prev.Events), per(s.Records, prev.Records),
		per(s.Entries, prev.Entries), per(s.Bytes, prev.Bytes)/1e6, s.FailedRecords, s.MaxLag.Round(time.Millisecond))
}
