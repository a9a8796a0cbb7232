package proxy

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestQueueAnsweredBeforePushed: a shared connection may answer a command
// before the reader has queued its item (another session's flush wrote it).
// The wake-up of the answer then finds the queue empty, and the push must
// wake the writer itself.
func TestQueueAnsweredBeforePushed(t *testing.T) {
	q := newReplyQueue()
	var sleeps atomic.Int32 // the writer calls idle after finding nothing to take, before it sleeps
	sleptTimes := func(n int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); sleeps.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the writer went to sleep %d times, want %d", sleeps.Load(), n)
			}
		}
	}
	got := make(chan *item)
	go func() { got <- q.next(nil, func() error { sleeps.Add(1); return nil }) }()
	sleptTimes(1)
	it := &item{shared: true}
	it.ready.Store(true) // item.answer, before the push
	signal(q.wake)
	sleptTimes(2) // woken for nothing: the queue is still empty
	q.push(it, func() error { return nil })
	select {
	case g := <-got:
		if g != it {
			t.Fatalf("next = %p, want the answered item %p", g, it)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the writer was not woken for an item answered before it was queued")
	}
}

// TestQueueOrderAndWakeUps: items come out in order; a shared item not
// answered yet holds back the ones behind it, and its answer wakes the
// writer; a full queue makes the reader call full, then wait for room.
func TestQueueOrderAndWakeUps(t *testing.T) {
	q := newReplyQueue()
	idle := func() error { return nil }
	local := &item{local: okReply}
	shared := &item{shared: true}
	after := &item{local: okReply}
	for _, it := range []*item{local, shared, after} {
		if !q.push(it, idle) {
			t.Fatal("push refused")
		}
	}
	if g := q.next(nil, idle); g != local {
		t.Fatalf("first = %p, want the local item", g)
	}
	got := make(chan *item, 2)
	go func() {
		got <- q.next(nil, idle)
		got <- q.next(nil, idle)
	}()
	select {
	case <-got:
		t.Fatal("an item came out before the shared item was answered")
	case <-time.After(50 * time.Millisecond):
	}
	shared.ready.Store(true)
	signal(q.wake)
	if g := <-got; g != shared {
		t.Fatalf("second = %p, want the shared item", g)
	}
	if g := <-got; g != after {
		t.Fatalf("third = %p, want the item after it", g)
	}

	for range maxQueued {
		q.push(&item{local: okReply}, idle)
	}
	fulls := 0
	pushed := make(chan bool)
	go func() { pushed <- q.push(&item{local: okReply}, func() error { fulls++; return nil }) }()
	select {
	case <-pushed:
		t.Fatal("a push into a full queue did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	q.next(nil, idle)
	if !<-pushed || fulls != 1 {
		t.Fatalf("push after room: full called %d times, want 1", fulls)
	}
	q.close()
	n := 0
	for q.next(nil, idle) != nil {
		n++
	}
	if n != maxQueued {
		t.Errorf("drained %d items after close, want %d", n, maxQueued)
	}
	if left := q.stop(); len(left) != 0 || q.push(&item{}, idle) {
		t.Error("a stopped queue kept items or took a push")
	}
}
