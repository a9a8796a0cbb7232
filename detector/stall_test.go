package detector

import (
	"testing"
	"time"
)

// stallRun plays a detector's rounds, 100 ms apart, to a stalls.
type stallRun struct {
	s     *stalls
	start time.Time
	round uint64
}

func newStallRun(hold time.Duration) *stallRun {
	return &stallRun{s: newStalls(Config{StallHold: hold, Flush: 100 * time.Millisecond, Window: time.Second}),
		start: time.Unix(1_700_000_000, 0)}
}

// next ends the next round at start + 100 ms × round; newest[p] is
// partition p's newest event time as an offset from start (negative: no
// counts this round).
func (r *stallRun) next(newest ...time.Duration) (reach time.Duration, late int) {
	r.round++
	now := r.start.Add(time.Duration(r.round) * 100 * time.Millisecond)
	for p, n := range newest {
		var ms int64
		if n >= 0 {
			ms = r.start.Add(n).UnixMilli()
		}
		r.s.see(TopicPartition{Topic: "t", Partition: p}, r.round, ms, now)
	}
	ms, late := r.s.reach(r.round, now)
	if ms == 0 {
		return -1, late
	}
	return time.UnixMilli(ms).Sub(r.start), late
}

// now is the current round's end, as an offset from start.
func (r *stallRun) now() time.Duration { return time.Duration(r.round) * 100 * time.Millisecond }

// TestStallsHoldLatePartition: three partitions get records every round,
// 150 ms behind the clock. Partition 2's stop: within three rounds it holds
// the reach at its last event time while the others go on; its backlog,
// read over several rounds, holds it until it has caught up.
func TestStallsHoldLatePartition(t *testing.T) {
	r := newStallRun(5 * time.Second)
	live := func() time.Duration { return r.now() + 100*time.Millisecond - 150*time.Millisecond }
	for range 20 {
		if reach, late := r.next(live(), live(), live()); late != 0 {
			t.Fatalf("at %v, all partitions on time: %d late (reach %v)", r.now(), late, reach)
		}
	}
	last := live()
	r.next(live(), live(), last)
	var heldAt time.Duration
	for i := range 15 {
		reach, late := r.next(live(), live(), -1)
		if late == 1 && heldAt == 0 {
			heldAt = r.now()
		}
		if heldAt > 0 && (late != 1 || reach != last) {
			t.Fatalf("round %d of the stop: reach %v, %d late; want %v, 1", i, reach, late, last)
		}
	}
	if stop := r.now() - 1500*time.Millisecond; heldAt == 0 || heldAt-stop > 300*time.Millisecond {
		t.Fatalf("held from %v, the stop at %v: want within 300 ms", heldAt, stop)
	}
	// The backlog: 400 ms of event time per round until it has caught up.
	for at := last + 400*time.Millisecond; at < live(); at += 400 * time.Millisecond {
		if reach, late := r.next(live(), live(), at); late != 1 || reach != at {
			t.Fatalf("at %v, partition 2 read up to %v: reach %v, %d late; want it held there", r.now(), at, reach, late)
		}
	}
	for range 3 {
		if reach, late := r.next(live(), live(), live()); late != 0 {
			t.Fatalf("caught up at %v: reach %v, %d late; want none", r.now(), reach, late)
		}
	}
}

// TestStallsRelease: when every partition stops, they hold the reach for
// StallHold and are then taken to have stopped: they hold nothing until
// they have their cadence again. A partition that gets a record only now
// and then, or that was just taken over, never holds the reach, and one
// that no longer answers (moved to another member) is forgotten.
func TestStallsRelease(t *testing.T) {
	r := newStallRun(time.Second)
	live := func() time.Duration { return r.now() + 100*time.Millisecond - 150*time.Millisecond }
	sparse := func(i int) time.Duration {
		if i%8 == 0 {
			return live()
		}
		return -1
	}
	for i := range 40 {
		r.next(live(), sparse(i))
	}
	held := 0
	for range 30 {
		if _, late := r.next(-1, -1); late > 0 {
			held++
		}
	}
	// Late from the third round on, released after 1 s of it.
	if held < 9 || held > 11 {
		t.Errorf("every partition stopped: held the reach for %d rounds, want 10 (StallHold 1 s)", held)
	}
	for i := range busyRounds - 1 {
		r.next(live(), -1)
		if _, late := r.next(-1, -1); late > 0 {
			t.Fatalf("after %d rounds with counts since its release, partition 0 holds the reach", i+1)
		}
	}
	r.next(live(), -1) // now with its cadence (a record every 200 ms): a stop is late again
	late := 0
	for range 8 {
		_, late = r.next(-1, -1)
	}
	if late != 1 {
		t.Errorf("partition 0 with its cadence again: %d late 800 ms after its stop, want 1", late)
	}
	if _, late := r.next(); late != 0 || len(r.s.parts) != 0 {
		t.Errorf("no partition answers: %d late, %d remembered; want none", late, len(r.s.parts))
	}
	off := newStallRun(-1)
	for range 20 {
		off.next(off.now() - 50*time.Millisecond)
	}
	for range 10 {
		if _, late := off.next(-1); late != 0 {
			t.Fatal("StallHold < 0: a partition held the reach")
		}
	}
}
