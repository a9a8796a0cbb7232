package proxy

import "sync"

// replyQueue holds a session's items in the order their replies go to the
// client: the reader pushes them, the writer takes them. The writer sleeps
// on one channel, wake, for both a new item and a shared connection's
// reply, and is woken only when it can write: the reader wakes it for an
// item whose reply it has (made by the proxy, or read by the writer from
// the session's own upstream connection), and the shared connection's
// reader for an item sent there, once its reply has come (item.answer). A
// command on a shared connection so costs the writer one wake-up, not one
// for the item and another for its reply.
type replyQueue struct {
	wake chan struct{} // cap 1

	mu      sync.Mutex
	space   *sync.Cond // a full queue has room again, or the writer stopped
	items   []*item    // items[head:] are queued
	head    int
	closed  bool // the reader queues no more
	stopped bool // the writer writes no more: pushes are refused
	waiting bool // the writer sleeps until an item is pushed
}

// maxQueued bounds the items queued: a reader that gets this far ahead of
// the writer waits for it.
const maxQueued = 4096

func newReplyQueue() *replyQueue {
	q := &replyQueue{wake: make(chan struct{}, 1)}
	q.space = sync.NewCond(&q.mu)
	return q
}

// push queues it. While the queue is full it first calls full (the reader
// sends the commands whose replies the writer waits for), then waits for
// room. false: the writer has stopped, or full failed; it is not queued,
// and its owner gives back what it keeps.
func (q *replyQueue) push(it *item, full func() error) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= maxQueued && !q.stopped {
		q.mu.Unlock()
		if full() != nil {
			return false
		}
		q.mu.Lock()
		for len(q.items)-q.head >= maxQueued && !q.stopped {
			q.space.Wait()
		}
	}
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	// A shared item wakes it once answered, which may have been already.
	wake := q.waiting && (!it.shared || it.ready.Load())
	if wake {
		q.waiting = false
	}
	q.mu.Unlock()
	if wake {
		signal(q.wake)
	}
	return true
}

// close tells the writer that nothing more is queued.
func (q *replyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.wake)
}

// next takes the first item once its reply can be written: at once unless
// it was sent on a shared connection and is not answered yet. Before
// sleeping it calls idle (the writer sends what it has written). nil: the
// queue is closed and empty, stop was closed, or idle failed.
func (q *replyQueue) next(stop <-chan struct{}, idle func() error) *item {
	for {
		q.mu.Lock()
		q.waiting = false
		if q.head < len(q.items) {
			if it := q.items[q.head]; !it.shared || it.ready.Load() {
				if len(q.items)-q.head == maxQueued {
					q.space.Signal()
				}
				q.items[q.head] = nil
				if q.head++; q.head == len(q.items) {
					q.items, q.head = q.items[:0], 0
				}
				q.mu.Unlock()
				return it
			}
		} else if q.closed {
			q.mu.Unlock()
			return nil
		} else {
			q.waiting = true
		}
		q.mu.Unlock()
		if idle() != nil {
			return nil
		}
		select {
		case <-q.wake:
		case <-stop:
			return nil
		}
	}
}

// stop refuses any further push, wakes a reader waiting for room and
// returns the items still queued.
func (q *replyQueue) stop() []*item {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	q.space.Broadcast()
	left := q.items[q.head:]
	q.items, q.head = nil, 0
	return left
}
