// Package deployments has no code: it holds the files that deploy Hotspot
// (Prometheus alert rules, the Grafana dashboard, Kubernetes manifests) and
// the tests that check them against the code they deploy. See
// docs/operations.md.
//
// Invariant: every metric a rule or panel queries, every flag or variable a
// manifest sets and every path a probe asks for is one that the binaries
// built from cmd/ really have; the tests fail otherwise.
package deployments
