package aggregator

import "time"

// seqMemory is how many sequence numbers of one source the shard remembers
// to drop retried batches: a detector retries one flush at a time, and this
// covers many minutes of passes.
const seqMemory = 1024

// sourceIdle is how long a source is remembered after its last batch.
const sourceIdle = 10 * time.Minute

// source is what the shard knows about one detector (a batch's Source).
type source struct {
	heard time.Time // receipt of its last batch
	end   int64     // event time its counts reached, Unix ms; 0: unknown
	seqs  map[uint64]struct{}
	ring  [seqMemory]uint64 // insertion order of seqs, for forgetting the oldest
	next  int
}

// applied reports whether the batch numbered seq was applied already.
// Sequence 0 (unnumbered) never was.
func (s *source) applied(seq uint64) bool {
	_, ok := s.seqs[seq]
	return ok && seq != 0
}

// remember records that the batch numbered seq was applied, forgetting the
// oldest of seqMemory.
func (s *source) remember(seq uint64) {
	if seq == 0 {
		return
	}
	if old := s.ring[s.next]; old != 0 {
		delete(s.seqs, old)
	}
	s.ring[s.next] = seq
	s.next = (s.next + 1) % seqMemory
	s.seqs[seq] = struct{}{}
}

// maxSources bounds the detectors a shard keeps state for (about 25 KB
// each): far more than a cluster runs, so that a sender inventing sources
// cannot grow the table without bound.
const maxSources = 1024

// source returns the state of the detector named name. Past maxSources a
// new name gets a state that is not kept: its batches are counted, but
// neither deduplicated nor part of the coverage. The caller holds t.mu.
func (t *table) source(name string) *source {
	s := t.sources[name]
	if s == nil {
		s = &source{seqs: make(map[uint64]struct{})}
		if len(t.sources) < maxSources {
			t.sources[name] = s
		}
	}
	return s
}

// coverage returns how much time the counts of every window reach at now:
// from the start of the window's oldest bucket to the event time the live
// detectors' counts reached, on average (each detector reads a share of the
// partitions, so a key's counts in the window lag by the mean of their
// lags). A detector is live when it sent a batch within Stall and its counts
// reach within two buckets of now: one that lags more (replaying after a
// rebalance) is left out, so that the others' counts are not divided by too
// short a time; its own missing counts make the rate read low, not high.
// Without live detectors with event times (version 1 and 2 batches, Add),
// counts are placed at receipt, where each stands for the flush interval
// before it, and the result is Window, as before event times. It is kept
// within [Window - 2*Bucket, Window], so that no error in it makes a rate
// read more than Window/(Window-2*Bucket) (25 %) high. The caller holds t.mu.
func (t *table) coverage(now time.Time) float64 {
	nowMs := now.UnixMilli()
	var sum, n int64
	for name, s := range t.sources {
		age := now.Sub(s.heard)
		if age >= sourceIdle {
			delete(t.sources, name)
			continue
		}
		if s.end == 0 || age >= t.p.stall || nowMs-s.end > 2*t.p.bucketNs/int64(time.Millisecond) {
			continue
		}
		sum += min(s.end, nowMs)
		n++
	}
	if n == 0 {
		return t.p.winSec
	}
	reach := sum / n
	start := (t.bucket(now) - int64(t.p.buckets) + 1) * t.p.bucketNs / int64(time.Millisecond)
	c := float64(reach-start) / 1000
	return min(max(c, t.p.winSec-2*float64(t.p.bucketNs)/1e9), t.p.winSec)
}
