package detector

import (
	"context"
	"fmt"
	"sync"

	"github.com/hotspot-dev/hotspot/hotset"
)

// Membership is the detectors' group in ZooKeeper, under
// hotset.DetectorsDir: each detector holds an ephemeral node there while it
// runs, and counts the nodes to know D, the number of detectors its local
// filter divides its loss bound by. A ZooKeeper session of internal/zkgroup
// implements it.
type Membership interface {
	// Join keeps the ephemeral node dir/id holding data until ctx ends,
	// then deletes it. It returns early only on an error it cannot recover
	// from.
	Join(ctx context.Context, dir, id string, data []byte) error
	// Watch calls fn with dir's children (name -> data) at first and after
	// every change, until ctx ends.
	Watch(ctx context.Context, dir string, fn func(members map[string][]byte)) error
}

// member runs this detector's membership until ctx ends: it registers
// cfg.ID at cfg.Addr and follows how many detectors are registered. An error
// of either loop while ctx lasts goes to fail.
func (d *Detector) member(ctx context.Context, fail func(error)) {
	dir := hotset.DetectorsDir(d.cfg.Root)
	data := hotset.EncodeMember(hotset.Member{ID: d.cfg.ID, Addr: d.cfg.Addr})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := d.cfg.Membership.Join(ctx, dir, hotset.Escape(d.cfg.ID), data)
		if ctx.Err() == nil {
			fail(fmt.Errorf("detector: membership: %w", err))
		}
	})
	wg.Go(func() {
		err := d.cfg.Membership.Watch(ctx, dir, func(m map[string][]byte) {
			d.members.Store(int64(len(m)))
		})
		if ctx.Err() == nil {
			fail(fmt.Errorf("detector: following the detectors: %w", err))
		}
	})
	wg.Wait()
}
