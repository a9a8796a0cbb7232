package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrNoBroker is returned (wrapped) by EnsureTopic when no broker answers.
var ErrNoBroker = errors.New("kafkaio: no Kafka broker answers")

// EnsureTopic creates topic with the given number of partitions and the
// brokers' default replication factor unless it exists, then waits until
// every partition has a leader that serves it, so that the first records
// written are not refused. It leaves an existing topic as it is, whatever its
// partition count, and reports that count. A create request that a broker
// drops or answers with a retriable error (a broker restarting) is sent
// again. When no broker answers, the error wraps ErrNoBroker.
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int) (int, error) {
	return EnsureTopicWith(ctx, nil, brokers, topic, partitions)
}

// EnsureTopicWith is EnsureTopic through a client with sec's TLS and SASL.
func EnsureTopicWith(ctx context.Context, sec *Security, brokers []string, topic string, partitions int) (int, error) {
	return EnsureTopicSpec(ctx, sec, brokers, topic, TopicSpec{Partitions: partitions})
}

// TopicSpec is how EnsureTopicSpec creates a missing topic.
type TopicSpec struct {
	Partitions int // at least 1
	// Replicas is the replication factor; 0 takes the brokers'
	// default.replication.factor (CreateTopics with -1, KIP-464).
	Replicas int
	// Config holds topic settings (e.g. message.timestamp.type:
	// LogAppendTime); nil keeps the brokers' defaults.
	Config map[string]string
}

// EnsureTopicSpec is EnsureTopicWith for a topic created as spec says; an
// existing topic keeps its own partitions, replicas and settings. A
// replication factor the cluster cannot meet (more than its brokers) is an
// error that names the topic and wraps kafka.InvalidReplicationFactor.
func EnsureTopicSpec(ctx context.Context, sec *Security, brokers []string, topic string, spec TopicSpec) (int, error) {
	if len(brokers) == 0 || topic == "" || spec.Partitions < 1 || spec.Replicas < 0 {
		return 0, errors.New("kafkaio: EnsureTopic needs brokers, a topic, partitions >= 1 and replicas >= 0")
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second, Transport: sec.Transport()}
	return ensureTopic(ctx, client, brokers, topic, spec)
}

// ensureTopic is EnsureTopicSpec through client.
func ensureTopic(ctx context.Context, client *kafka.Client, brokers []string, topic string, spec TopicSpec) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	n, err := leaders(ctx, client, topic)
	if err != nil {
		return 0, fmt.Errorf("%w at %s: %w", ErrNoBroker, strings.Join(brokers, ","), err)
	}
	if n == 0 {
		tc := kafka.TopicConfig{Topic: topic, NumPartitions: spec.Partitions, ReplicationFactor: spec.Replicas}
		replicas := strconv.Itoa(spec.Replicas)
		if spec.Replicas == 0 {
			tc.ReplicationFactor, replicas = -1, "the brokers' default"
		}
		for _, k := range slices.Sorted(maps.Keys(spec.Config)) {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: spec.Config[k]})
		}
		if err := makeTopic(ctx, client, tc); err != nil {
			return 0, fmt.Errorf("kafkaio: create topic %s (%d partitions, replication factor %s): %w", topic, spec.Partitions, replicas, err)
		}
	}
	for {
		n, err := leaders(ctx, client, topic)
		if err != nil {
			return 0, fmt.Errorf("kafkaio: topic %s: %w", topic, err)
		}
		// Metadata names a leader before the leader serves the partition:
		// writes right after creation fail with "not leader" or "unknown
		// topic or partition" for a moment, so wait until every partition
		// answers an offsets request too.
		if n > 0 && serving(ctx, client, topic, n) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kafkaio: topic %s has partitions that are not served yet: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// makeTopic creates the topic tc describes; one that exists already is
// fine. A request that a broker did not answer (a connection refused, reset
// or closed midway, as while a broker restarts) or answered with a retriable
// error is sent again, 100 ms later, until ctx ends.
func makeTopic(ctx context.Context, client *kafka.Client, tc kafka.TopicConfig) error {
	for {
		res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
		if err == nil {
			err = res.Errors[tc.Topic]
		}
		if err == nil || errors.Is(err, kafka.TopicAlreadyExists) {
			return nil
		}
		if !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// retriable reports whether a request that failed with err may succeed if
// sent again: the broker did not answer, or said so (kafka-go's temporary
// errors: no controller yet, not the controller, a timeout...).
func retriable(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne) && ne.Timeout()
}

// serving reports whether every partition of topic answers a ListOffsets
// request without an error.
func serving(ctx context.Context, client *kafka.Client, topic string, partitions int) bool {
	req := make([]kafka.OffsetRequest, partitions)
	for p := range req {
		req[p] = kafka.LastOffsetOf(p)
	}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}})
	if err != nil || len(res.Topics[topic]) != partitions {
		return false
	}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return false
		}
	}
	return true
}

// leaders returns the topic's partition count when it exists and every
// partition has a leader, 0 when it does not exist or is not ready yet, and
// an error only when the cluster cannot be asked.
func leaders(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name != topic || t.Error != nil || len(t.Partitions) == 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return 0, nil
			}
		}
		return len(t.Partitions), nil
	}
	return 0, nil
}
