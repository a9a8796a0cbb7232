package detector

import "time"

// stalls follows the cadence of each partition of a member, to tell a
// partition whose records stopped coming from one that gets a record only
// now and then. When a partition's leader moves, or its producers' writes
// wait for the in-sync replicas (acks=all during a broker's restart), its
// records arrive late, seconds later, and then as a backlog over several
// rounds, while the detector's other partitions go on; End, the newest
// event time over all of them, moves on too, and the aggregators would
// read that partition's share of every key as missing. So a busy partition
// (counts in round after round, its usual gap at most busy) whose newest
// event time is older than it usually is by more than twice its usual gap
// is late: it holds the detector's reach at that event time until it has
// caught up, or for at most hold, after which its traffic is taken to have
// stopped (docs/detector.md, "Stalled partitions"). A partition kept
// through a rebalance goes on with its cadence in the next generation
// (resume): a broker's restart that moves the group's coordinator stops
// every member for a second or two, and a partition whose records were
// held up before it must hold the reach from the new generation's first
// round, not only once it has a cadence again.
type stalls struct {
	hold  time.Duration // Config.StallHold; <= 0: never hold
	flush time.Duration // Config.Flush: the shortest usual gap
	busy  time.Duration // the longest usual gap of a busy partition
	parts map[TopicPartition]*cadence
}

// busyRounds is how many rounds with counts a partition needs before its
// cadence is trusted: a partition just taken over, or released after a
// hold, does not hold the reach.
const busyRounds = 5

// cadence is one partition's.
type cadence struct {
	last  int64         // newest event time counted, Unix ms
	gap   time.Duration // usual event time between its rounds with counts (smoothed)
	lag   time.Duration // usual age of its newest event time at the end of a round with counts (smoothed)
	n     int           // rounds with counts since taken or released
	since time.Time     // when it fell late; zero while it is not
	round uint64        // the last round it answered
}

func newStalls(cfg Config) *stalls {
	return &stalls{hold: cfg.StallHold, flush: cfg.Flush, busy: cfg.Window / 2, parts: make(map[TopicPartition]*cadence)}
}

// resume takes over the cadences a previous generation left of this
// generation's partitions (Detector.cadencesOf). Round numbers start
// afresh with each generation: a cadence answers this generation's rounds
// from its first.
func (s *stalls) resume(kept map[TopicPartition]*cadence) {
	for tp, c := range kept {
		c.round = 0
		s.parts[tp] = c
	}
}

// smooth moves an average a quarter of the way to x, or sets it with the
// first sample.
func smooth(avg *time.Duration, x time.Duration, first bool) {
	if first {
		*avg = x
		return
	}
	*avg += (x - *avg) / 4
}

// late reports whether c's newest event time is older at now than usual
// by more than twice its usual gap.
func (s *stalls) late(c *cadence, now time.Time) bool {
	return c.n >= busyRounds && c.gap <= s.busy &&
		now.Sub(time.UnixMilli(c.last)) > c.lag+2*max(c.gap, s.flush)
}

// see records a partition's answer to round id at now: the newest event
// time it counted, Unix ms (0: none). A late partition's rounds do not
// change its usual gap and age: it is replaying a backlog.
func (s *stalls) see(tp TopicPartition, id uint64, newest int64, now time.Time) {
	c := s.parts[tp]
	if c == nil {
		c = &cadence{}
		s.parts[tp] = c
	}
	c.round = id
	if newest <= c.last {
		return
	}
	if c.n > 0 && c.since.IsZero() {
		smooth(&c.gap, time.Duration(newest-c.last)*time.Millisecond, c.n == 1)
	}
	c.last = newest
	if !s.late(c, now) {
		smooth(&c.lag, max(now.Sub(time.UnixMilli(newest)), 0), c.n == 0)
	}
	c.n++
}

// reach returns the oldest newest event time of the late partitions, Unix
// ms, and how many they are; 0 and 0 when none is. A partition that did
// not answer round id is forgotten, and one late for hold is released: its
// traffic has stopped, and it no longer counts as busy until it has its
// cadence again.
func (s *stalls) reach(id uint64, now time.Time) (ms int64, late int) {
	if s.hold <= 0 {
		return 0, 0
	}
	for tp, c := range s.parts {
		switch {
		case c.round != id:
			delete(s.parts, tp)
			continue
		case !s.late(c, now):
			c.since = time.Time{}
			continue
		case c.since.IsZero():
			c.since = now
		case now.Sub(c.since) >= s.hold:
			c.n, c.since = 0, time.Time{}
			continue
		}
		if late++; ms == 0 || c.last < ms {
			ms = c.last
		}
	}
	return ms, late
}
