package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Run generates the workload described by cfg until cfg.Duration has passed
// or ctx is canceled, then delivers what is pending, closes the Sink and
// returns the run's Stats, including its Truth.
//
// The run starts at the next multiple of 100 ms of the wall clock, so truth
// slots line up with 100 ms buckets of Unix time. Tick i is generated at the
// end of its interval, start + (i+1)*Tick; when the generator falls behind,
// it generates the late ticks at once, so the achieved rate still matches the
// target, and reports the delay as Stats.MaxLag. Cancellation is checked
// between ticks: a tick once generated is always handed to the Sink in full,
// so the Truth holds exactly what the Sink received.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return Stats{}, err
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64() | 1
	}
	sink := c.Sink
	var ks *kafkaSink
	if sink == nil {
		if ks, err = newKafkaSink(c); err != nil {
			return Stats{}, err
		}
		sink = ks
	}

	startMs := (time.Now().UnixMilli()/SlotDuration.Milliseconds() + 1) * SlotDuration.Milliseconds()
	start := time.UnixMilli(startMs)
	g, err := newGenerator(c, startMs)
	if err != nil {
		return Stats{}, errors.Join(err, sink.Close())
	}
	c.Logger.Info("loadgen: run", "form", c.Form, "rate", c.Rate, "keys", c.Keys, "skew", c.Skew,
		"apps", len(g.apps), "flashes", len(c.Flashes), "duration", c.Duration, "tracked", len(g.truth.Keys),
		"seed", c.Seed, "start", start)

	last, runErr := pace(ctx, c, g, sink, start)

	// Whatever ended the run, hand over the held-back records (their events
	// are already in the Truth) and let the Sink deliver them.
	drain := time.Now()
	if recs := g.finish(); len(recs) > 0 && runErr == nil {
		runErr = sink.Write(context.WithoutCancel(ctx), recs)
	}
	closeErr := sink.Close()
	stats := g.stats
	if g.ticks > 0 {
		// The schedule, or longer when the generator fell behind.
		stats.Elapsed = last.Sub(start)
	}
	stats.Drain = time.Since(drain)
	stats.FailedRecords, stats.FailedEvents = sink.Failed()
	if ks != nil {
		stats.ProduceRequests = ks.produceRequests()
	}
	stats.Truth = g.truth
	if err := errors.Join(runErr, closeErr); err != nil {
		return stats, err
	}
	if stats.FailedRecords > 0 {
		return stats, fmt.Errorf("loadgen: %d records (%d events) were not delivered", stats.FailedRecords, stats.FailedEvents)
	}
	return stats, nil
}

// pace generates ticks on schedule until the duration ends or ctx is
// canceled. It returns when the last tick was handed over, and an error
// only when the Sink fails.
func pace(ctx context.Context, c Config, g *generator, sink Sink, start time.Time) (last time.Time, err error) {
	timer := time.NewTimer(time.Until(start))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return last, nil
	case <-timer.C:
	}
	ticks := int64(-1) // unbounded
	if c.Duration > 0 {
		ticks = int64((c.Duration + c.Tick - 1) / c.Tick)
	}
	perSecond := int64(time.Second / c.Tick)
	for i := int64(0); i != ticks; i++ {
		deadline := start.Add(time.Duration(i+1) * c.Tick)
		wait := time.Until(deadline)
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return last, nil
			case <-timer.C:
			}
		} else {
			g.stats.MaxLag = max(g.stats.MaxLag, -wait)
			if ctx.Err() != nil {
				return last, nil
			}
		}
		if recs := g.step(i); len(recs) > 0 {
			// A generated tick is in the Truth already: hand it over in
			// full even if ctx is canceled meanwhile.
			if err := sink.Write(context.WithoutCancel(ctx), recs); err != nil {
				return last, err
			}
		}
		last = time.Now()
		if wait <= 0 {
			g.late(i, last)
		}
		if c.Progress != nil && (i+1)%perSecond == 0 {
			s := g.stats
			s.Elapsed = last.Sub(start)
			s.FailedRecords, s.FailedEvents = sink.Failed()
			c.Progress(s)
		}
	}
	return last, nil
}
