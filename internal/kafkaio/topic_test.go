package kafkaio

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

func TestEnsureTopicNoBroker(t *testing.T) {
	_, err := EnsureTopic(t.Context(), []string{"127.0.0.1:1"}, "t", 8)
	if !errors.Is(err, ErrNoBroker) {
		t.Errorf("EnsureTopic with no broker: %v, want ErrNoBroker", err)
	}
}

// TestEnsureTopicSpecConfig: a topic created with settings has them; an
// existing one is left as it is.
func TestEnsureTopicSpecConfig(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	cfg := map[string]string{"message.timestamp.type": "LogAppendTime"}
	deleteAtCleanup(t, addr, topic)
	if n, err := EnsureTopicSpec(t.Context(), nil, []string{addr}, topic, TopicSpec{Partitions: 2, Config: cfg}); err != nil || n != 2 {
		t.Fatalf("EnsureTopicSpec = %d, %v; want 2 partitions", n, err)
	}
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	res, err := client.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"message.timestamp.type"}}}})
	if err != nil || len(res.Resources) != 1 || len(res.Resources[0].ConfigEntries) != 1 ||
		res.Resources[0].ConfigEntries[0].ConfigValue != "LogAppendTime" {
		t.Fatalf("topic config %+v, %v; want message.timestamp.type LogAppendTime", res, err)
	}
	if n, err := EnsureTopicSpec(t.Context(), nil, []string{addr}, topic, TopicSpec{Partitions: 5}); err != nil || n != 2 {
		t.Errorf("existing topic: %d, %v; want it left with 2 partitions", n, err)
	}
}

// TestEnsureTopicSpecReplicas: Replicas 0 creates the topic with the
// brokers' default.replication.factor, Replicas 1 with one replica per
// partition, and more replicas than the cluster has brokers is refused with
// an error that names the topic.
func TestEnsureTopicSpecReplicas(t *testing.T) {
	addr := stacktest.Kafka(t)
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	md, err := client.Metadata(t.Context(), &kafka.MetadataRequest{Topics: []string{}})
	if err != nil || len(md.Brokers) == 0 {
		t.Fatalf("cluster metadata: %+v, %v", md, err)
	}
	def := brokerDefaultReplicas(t, client, md.Brokers[0].ID)
	for _, tc := range []struct{ replicas, want int }{{0, def}, {1, 1}} {
		topic := stacktest.Name(t)
		deleteAtCleanup(t, addr, topic)
		if n, err := EnsureTopicSpec(t.Context(), nil, []string{addr}, topic, TopicSpec{Partitions: 3, Replicas: tc.replicas}); err != nil || n != 3 {
			t.Fatalf("Replicas %d: EnsureTopicSpec = %d, %v; want 3 partitions", tc.replicas, n, err)
		}
		md, err := client.Metadata(t.Context(), &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
			t.Fatalf("Replicas %d: metadata of %s: %+v, %v", tc.replicas, topic, md, err)
		}
		for _, p := range md.Topics[0].Partitions {
			if len(p.Replicas) != tc.want {
				t.Errorf("Replicas %d: partition %d has %d replicas, want %d", tc.replicas, p.ID, len(p.Replicas), tc.want)
			}
		}
	}

	topic := stacktest.Name(t)
	deleteAtCleanup(t, addr, topic)
	too := len(md.Brokers) + 1 // 2 on the one-broker local stack
	n, err := EnsureTopicSpec(t.Context(), nil, []string{addr}, topic, TopicSpec{Partitions: 1, Replicas: too})
	if err == nil || n != 0 || !errors.Is(err, kafka.InvalidReplicationFactor) || !strings.Contains(err.Error(), topic) {
		t.Fatalf("Replicas %d on %d brokers: %d, %v; want an InvalidReplicationFactor error naming %s", too, len(md.Brokers), n, err, topic)
	}
	t.Logf("Replicas %d on %d brokers: %v", too, len(md.Brokers), err)
	if md, err := client.Metadata(t.Context(), &kafka.MetadataRequest{Topics: []string{topic}}); err != nil ||
		len(md.Topics) != 1 || !errors.Is(md.Topics[0].Error, kafka.UnknownTopicOrPartition) {
		t.Errorf("topic %s after the refusal: %+v, %v; want it not created", topic, md, err)
	}
}

// brokerDefaultReplicas returns broker id's default.replication.factor.
func brokerDefaultReplicas(t *testing.T, client *kafka.Client, id int) int {
	t.Helper()
	res, err := client.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(id), ConfigNames: []string{"default.replication.factor"}}}})
	if err != nil || len(res.Resources) != 1 || len(res.Resources[0].ConfigEntries) != 1 {
		t.Fatalf("broker %d default.replication.factor: %+v, %v", id, res, err)
	}
	n, err := strconv.Atoi(res.Resources[0].ConfigEntries[0].ConfigValue)
	if err != nil || n < 1 {
		t.Fatalf("broker %d default.replication.factor %q", id, res.Resources[0].ConfigEntries[0].ConfigValue)
	}
	return n
}

// deleteAtCleanup deletes topic when the test ends.
func deleteAtCleanup(t *testing.T, addr, topic string) {
	t.Cleanup(func() {
		client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
		_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
}

// flakyCreate drops the first CreateTopics request as a broker that closes
// the connection midway does (a broker restarting).
type flakyCreate struct {
	kafka.RoundTripper
	dropped atomic.Bool
}

func (f *flakyCreate) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if _, ok := req.(*createtopics.Request); ok && !f.dropped.Swap(true) {
		return nil, io.ErrUnexpectedEOF
	}
	return f.RoundTripper.RoundTrip(ctx, addr, req)
}

// TestEnsureTopicRetriesADroppedCreate: a CreateTopics request the broker
// did not answer is sent again (CI once lost a test to one, on the broker a
// test had just restarted).
func TestEnsureTopicRetriesADroppedCreate(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	tr := &flakyCreate{RoundTripper: &kafka.Transport{}}
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second, Transport: tr}
	t.Cleanup(func() {
		_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	n, err := ensureTopic(t.Context(), client, []string{addr}, topic, TopicSpec{Partitions: 2})
	if err != nil || n != 2 {
		t.Fatalf("ensureTopic = %d, %v; want 2 partitions", n, err)
	}
	if !tr.dropped.Load() {
		t.Fatal("no CreateTopics request was dropped")
	}
}
