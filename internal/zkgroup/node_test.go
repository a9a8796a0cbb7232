package zkgroup_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// TestNodeOperations runs the node operations the adapters use against the
// real ZooKeeper, then checks that a cut connection does not hold a call
// past its context.
func TestNodeOperations(t *testing.T) {
	addr, root := setup(t)
	cut := &stacktest.Cutter{}
	s := connect(t, addr, zkgroup.Config{Dialer: cut.Dial})
	ctx := t.Context()
	p := root + "/a/b/node"

	if err := s.Create(ctx, p, []byte("v1")); err != nil {
		t.Fatalf("Create (parents missing): %v", err)
	}
	if err := s.Create(ctx, p, []byte("again")); !errors.Is(err, zk.ErrNodeExists) {
		t.Errorf("Create of an existing node: %v, want ErrNodeExists", err)
	}
	data, stat, err := s.Get(ctx, p)
	if err != nil || string(data) != "v1" {
		t.Fatalf("Get = %q, %v; want v1", data, err)
	}
	if err := s.Set(ctx, p, []byte("v2"), stat.Version+1); !errors.Is(err, zk.ErrBadVersion) {
		t.Errorf("Set with a wrong version: %v, want ErrBadVersion", err)
	}
	if err := s.Set(ctx, p, []byte("v2"), stat.Version); err != nil {
		t.Errorf("Set: %v", err)
	}
	if err := s.Put(ctx, root+"/c/put", []byte("p")); err != nil {
		t.Errorf("Put (parents missing): %v", err)
	}
	if err := s.Put(ctx, root+"/c/put", []byte("p2")); err != nil {
		t.Errorf("Put (overwrite): %v", err)
	}
	if names, err := s.Children(ctx, root); err != nil || !slices.Equal(slices.Sorted(slices.Values(names)), []string{"a", "c"}) {
		t.Errorf("Children = %q, %v; want [a c]", names, err)
	}
	if err := s.Delete(ctx, p, -1); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, _, err := s.Get(ctx, p); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("Get after Delete: %v, want ErrNoNode", err)
	}

	// Right after the cut a call may fail at once with the connection's
	// own error; once the client is reconnecting, calls wait, and only ctx
	// bounds them.
	cut.Cut()
	defer cut.Heal()
	for attempt := 0; ; attempt++ {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		start := time.Now()
		_, _, err := s.Get(short, root+"/c/put")
		cancel()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Get on a cut connection returned after %v (%v), want within about 100ms", d, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err == nil || attempt == 20 {
			t.Fatalf("Get on a cut connection: %v, want DeadlineExceeded", err)
		}
	}
}

// TestAbandonedWriteIsNotSentLater: a write whose caller gave up while the
// connection was down is not sent once it is back. go-zookeeper queues a
// request made while it is disconnected and sends it when it reconnects;
// an aggregator retrying its publication through a partition had each
// attempt land after the heal, over newer state, and a key cold for
// seconds was back in an app's hot set (TestClusterZooKeeperPartition).
func TestAbandonedWriteIsNotSentLater(t *testing.T) {
	addr, root := setup(t)
	cut := &stacktest.Cutter{}
	s := connect(t, addr, zkgroup.Config{Dialer: cut.Dial})
	ctx := t.Context()
	p := root + "/node"
	if err := s.Put(ctx, p, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	cut.Cut()
	for s.Connected() {
		time.Sleep(time.Millisecond)
	}
	for _, op := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"Put", func(ctx context.Context) error { return s.Put(ctx, p, []byte("stale")) }},
		{"Set", func(ctx context.Context) error { return s.Set(ctx, p, []byte("stale"), -1) }},
		{"Delete", func(ctx context.Context) error { return s.Delete(ctx, p, -1) }},
	} {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if err := op.do(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while disconnected: %v, want DeadlineExceeded", op.name, err)
		}
		cancel()
	}
	cut.Heal()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("no reconnection within 10s of the heal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // what was queued would be sent by now
	if data, _, err := s.Get(ctx, p); err != nil || string(data) != "v1" {
		t.Fatalf("after the heal: %q, %v; want v1 (a write given up on while disconnected was sent later)", data, err)
	}
}
