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
	idle  bool      // its last batch had no counts (no End)
	back  time.Time // when it was last heard after a silence of Stall or more
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
// neither deduplicated nor part of the reach. The caller holds t.mu.
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

// reach returns the event time, Unix ms, up to which every live detector's
// counts have arrived: the minimum of the Ends of the live detectors whose
// last batch had counts. A detector is live when it sent a batch within
// Stall, leaving out a pause of every detector (see age), however far its
// End lags the clock: one replaying a backlog after
// a rebalance or an outage holds the reach back (setReach bounds how far
// the evaluated window follows it), and a dead one stops holding it back
// after Stall. A detector whose last batch had no counts has nothing
// outstanding and does not hold the reach back; when no live detector had
// counts (each reads a record only now and then), the reach is the newest
// End, at least oldest, that any live detector reported: what they read
// next happened after it. It is never the clock, whose newest buckets the
// detectors have not reported yet. ok is false without
// live detectors with event times (version 1 and 2 batches, Add), and when
// the idle ones' Ends are all older than oldest (the traffic stopped:
// nothing is on its way, and the window follows the clock). An idle
// detector back from a silence of Stall or more (a broker's restart, a
// rebalance) holds the reach as a busy one for maxLag after its return: it
// is about to replay what it missed. It also forgets sources silent for
// sourceIdle. The caller holds t.mu.
func (t *table) reach(now time.Time, oldest int64) (ms int64, ok bool) {
	ms = now.UnixMilli()
	var newest int64 // of the live idle detectors
	for name, s := range t.sources {
		age := t.age(s, now)
		if age >= sourceIdle {
			delete(t.sources, name)
			continue
		}
		if s.end == 0 || age >= t.p.stall {
			continue
		}
		if s.idle && now.Sub(s.back) >= t.p.maxLag {
			if s.end >= oldest {
				newest = max(newest, s.end)
			}
			continue
		}
		ms, ok = min(ms, s.end), true
	}
	if !ok && newest > 0 {
		return newest, true
	}
	return ms, ok
}
