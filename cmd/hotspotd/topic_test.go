package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestEnsureTopicReplicationFactor: a --replication-factor the cluster
// cannot meet stops hotspotd with an error that names the topic and the
// flag, instead of a detector waiting for a topic nobody creates.
func TestEnsureTopicReplicationFactor(t *testing.T) {
	addr := stacktest.Kafka(t)
	cfg := config{brokers: []string{addr}, topic: stacktest.Name(t), partitions: 1, replicas: 100}
	err := ensureTopic(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), cfg.topic) || !strings.Contains(err.Error(), "--replication-factor") {
		t.Fatalf("ensureTopic with replication factor 100: %v; want an error naming the topic and the flag", err)
	}
}
