package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

// Config is one bench run: the workload and the cluster it measures.
type Config struct {
	Workload    loadgen.Config       // the workload; its topic exists
	Partitions  int                  // the topic's, for the report
	Hotspotds   []*hotspotapi.Client // every hotspotd: CPU, memory and counts
	ZooKeeper   []string             // servers
	Root        string               // Hotspot's ZooKeeper root
	ZKAuth      zkgroup.Digest       // an identity that may read the hot set
	Settle      time.Duration        // wait after the workload for the pipeline to drain
	JSONPath    string               // also write the Result there; "" does not
	AllowMissed bool                 // missed keys are no error
	Rules       *rules.List          // installed for the run's app (and RuleApps-1 more) before the workload; nil: none
	RuleApps    int                  // with Rules: apps in all, at least 1
	Procs       []Proc               // the broker and ZooKeeper, for the pipeline's CPU

	// L1Keys returns the hot keys of the workload's app whose values sit
	// in the L1 of an app embedded as an SDK user would (cmd/hotspot: a
	// hotcache.Client's loaded hot keys), polled every 2 ms for the time
	// each key reached an app's memory; nil leaves that time out.
	L1Keys func() []string
}

// Run runs the workload against the cluster, watching it from outside,
// prints the report to out (and writes it as JSON to cfg.JSONPath), and
// returns it, with an error when the run measured nothing, was not fair
// (the generator fell behind) or missed keys that had to be reported
// (unless cfg.AllowMissed).
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	obs, err := startObserver(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer obs.close()
	if cfg.Rules != nil {
		undo, err := installRules(ctx, out, obs.sess, cfg)
		if err != nil {
			return Result{}, err
		}
		defer undo()
	}
	run, err := runWorkload(ctx, out, cfg)
	if err != nil {
		return Result{}, err
	}
	r := grade(cfg, run, obs.stop())
	printReport(out, r)
	if err := writeJSON(cfg.JSONPath, r); err != nil {
		return r, err
	}
	if err := measuredSomething(r, cfg.Workload); err != nil {
		return r, err
	}
	if err := fairRun(run.stats); err != nil {
		return r, err
	}
	return r, missedNone(r, cfg.AllowMissed)
}

// rulesSettle is how long installRules waits for every hotspotd to
// apply the rules (they do within 1 s).
const rulesSettle = 2 * time.Second

// installRules writes cfg.Rules as the rule node of the run's app and of
// cfg.RuleApps-1 more apps, waits for the hotspotds to apply them, and
// returns a func that deletes them again.
func installRules(ctx context.Context, out io.Writer, sess *zkgroup.Session, cfg Config) (func(), error) {
	st := rulestore.New(sess, cfg.Root)
	apps := []string{cfg.Workload.App}
	for i := 1; i < cfg.RuleApps; i++ {
		apps = append(apps, fmt.Sprintf("%s-r%d", cfg.Workload.App, i))
	}
	undo := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, app := range apps {
			_ = st.Delete(dctx, app, 0) // best effort: the run is over
		}
	}
	for _, app := range apps {
		l := *cfg.Rules
		l.App, l.Version = app, 0
		if _, err := st.Put(ctx, &l); err != nil {
			undo()
			return nil, fmt.Errorf("--rules: installing the rules of %s: %w", app, err)
		}
	}
	fmt.Fprintf(out, "hotspot bench: %d rules installed for %d apps\n", len(cfg.Rules.Rules), len(apps))
	select {
	case <-ctx.Done():
		undo()
		return nil, ctx.Err()
	case <-time.After(rulesSettle):
	}
	return undo, nil
}

// workloadRun is the workload's outcome and the hotspotd metrics around it.
type workloadRun struct {
	stats               loadgen.Stats
	before, after       []map[string]float64 // per hotspotd, before the run and after the settle time
	cpuBefore, cpuAfter []float64            // per Config.Procs, the same moments
	interval            time.Duration        // from before to after
}

// runWorkload runs the workload, printing a progress line a second,
// then waits cfg.Settle for the pipeline to drain.
func runWorkload(ctx context.Context, out io.Writer, cfg Config) (workloadRun, error) {
	var run workloadRun
	var err error
	if run.before, err = Scrape(ctx, cfg.Hotspotds); err != nil {
		return run, err
	}
	run.cpuBefore = sampleCPU(cfg.Procs)
	began := time.Now()
	w := cfg.Workload
	fmt.Fprintf(out, "hotspot bench: %s records, %.0f background events/s over %d keys (s=%.2f), app %s, %v, topic %s (%d partitions)\n",
		w.Form, w.Rate, w.Keys, w.Skew, w.App, w.Duration, w.Topic, cfg.Partitions)
	var prev loadgen.Stats
	w.Progress = func(s loadgen.Stats) { fmt.Fprint(out, s.Progress(prev)); prev = s }
	if run.stats, err = loadgen.Run(ctx, w); err != nil {
		return run, err
	}
	select {
	case <-ctx.Done():
		return run, ctx.Err()
	case <-time.After(cfg.Settle):
	}
	run.after, err = Scrape(ctx, cfg.Hotspotds)
	run.cpuAfter = sampleCPU(cfg.Procs)
	run.interval = time.Since(began)
	return run, err
}
