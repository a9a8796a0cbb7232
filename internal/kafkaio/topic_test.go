package kafkaio

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

func TestEnsureTopicNoBroker(t *testing.T) {
	_, err := EnsureTopic(t.Context(), []string{"127.0.0.1:1"}, "t", 8)
	if !errors.Is(err, ErrNoBroker) {
		t.Errorf("EnsureTopic with no broker: %v, want ErrNoBroker", err)
	}
}

// TestEnsureTopicConfig: a topic created with settings has them; an
// existing one is left as it is.
func TestEnsureTopicConfig(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	cfg := map[string]string{"message.timestamp.type": "LogAppendTime"}
	if n, err := EnsureTopicConfig(t.Context(), nil, []string{addr}, topic, 2, cfg); err != nil || n != 2 {
		t.Fatalf("EnsureTopicConfig = %d, %v; want 2 partitions", n, err)
	}
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	res, err := client.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"message.timestamp.type"}}}})
	if err != nil || len(res.Resources) != 1 || len(res.Resources[0].ConfigEntries) != 1 ||
		res.Resources[0].ConfigEntries[0].ConfigValue != "LogAppendTime" {
		t.Fatalf("topic config %+v, %v; want message.timestamp.type LogAppendTime", res, err)
	}
	if n, err := EnsureTopicConfig(t.Context(), nil, []string{addr}, topic, 5, nil); err != nil || n != 2 {
		t.Errorf("existing topic: %d, %v; want it left with 2 partitions", n, err)
	}
}
