// Package bench is hotspot bench's measurement: it runs a generated
// workload (internal/loadgen) against a running cluster, watches the cluster
// from the outside as its users see it (the hot set in ZooKeeper, an
// embedded hotcache client's L1, the hotspotd processes' metrics, the
// broker's and ZooKeeper's CPU from /proc), and grades what it saw against
// the workload's ground truth: throughput per CPU-second, Kafka traffic,
// detection delay, precision and recall.
//
// Invariant: it only observes; the one thing it changes in the cluster is
// the rule list of the run's own apps (Config.Rules), which it deletes
// again when the run ends.
package bench
