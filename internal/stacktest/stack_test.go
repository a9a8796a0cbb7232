package stacktest_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestKafkaConsumerGroup produces to and consumes from the real broker
// through a kafka-go consumer group, and checks the committed offset.
func TestKafkaConsumerGroup(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	createTopic(t, addr, topic, 3)
	// RequiredAcks: the zero value is fire-and-forget, and a new topic's
	// partitions take a moment to get a leader: without acks those writes
	// are lost without an error.
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: &kafka.RoundRobin{},
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	const n = 300
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte(strconv.Itoa(i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Join a consumer group, read each assigned partition, commit through
	// the generation: the way the detector reads.
	group := stacktest.Name(t)
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: group, Brokers: []string{addr}, Topics: []string{topic},
		HeartbeatInterval: time.Second, SessionTimeout: 6 * time.Second,
		RebalanceTimeout: 6 * time.Second, StartOffset: kafka.FirstOffset,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	gen, err := cg.Next(ctx)
	if err != nil {
		t.Fatalf("join group: %v", err)
	}
	assigned := gen.Assignments[topic]
	if len(assigned) != 3 {
		t.Fatalf("one member was assigned %d partitions, want 3", len(assigned))
	}
	seen := make(map[string]bool)
	commit := make(map[int]int64)
	for _, a := range assigned {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{addr}, Topic: topic, Partition: a.ID,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Second,
		})
		for done := false; !done; {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("consume partition %d after %d messages: %v", a.ID, len(seen), err)
			}
			seen[string(m.Value)] = true
			commit[a.ID] = m.Offset + 1
			done = m.Offset+1 >= m.HighWaterMark
		}
		r.Close()
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{topic: commit}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for i := range n {
		if !seen[strconv.Itoa(i)] {
			t.Fatalf("message %d was never consumed", i)
		}
	}

	// The group's committed offsets cover every message.
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	off, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	var committed int64
	for _, p := range off.Topics[topic] {
		committed += p.CommittedOffset
	}
	if committed != n {
		t.Fatalf("committed offsets sum to %d, want %d", committed, n)
	}
}

func createTopic(t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// TestZooKeeperWatch creates znodes in the real ZooKeeper and sees a data
// watch and a child watch fire.
func TestZooKeeperWatch(t *testing.T) {
	addr := stacktest.ZK(t)
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := "/" + stacktest.Name(t)
	if _, err := conn.Create(root, []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", root, err)
	}
	defer conn.Delete(root, -1)

	data, _, dataFired, err := conn.GetW(root)
	if err != nil || string(data) != "v1" {
		t.Fatalf("get %s = %q, %v; want v1", root, data, err)
	}
	_, _, childFired, err := conn.ChildrenW(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set(root, []byte("v2"), -1); err != nil {
		t.Fatal(err)
	}
	child := root + "/member"
	if _, err := conn.Create(child, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	defer conn.Delete(child, -1)
	for _, w := range []struct {
		name string
		ch   <-chan zk.Event
		want zk.EventType
	}{{"data", dataFired, zk.EventNodeDataChanged}, {"children", childFired, zk.EventNodeChildrenChanged}} {
		select {
		case ev := <-w.ch:
			if ev.Type != w.want {
				t.Errorf("%s watch: got %v, want %v", w.name, ev.Type, w.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s watch did not fire", w.name)
		}
	}
}

// TestRedisSetGet writes and reads the real Redis.
func TestRedisSetGet(t *testing.T) {
	addr := stacktest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	key := stacktest.Name(t)
	for i := range 10 {
		k := fmt.Sprintf("%s:%d", key, i)
		if err := c.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
		got, err := c.Get(ctx, k).Int()
		if err != nil || got != i {
			t.Fatalf("get %s = %d, %v; want %d", k, got, err, i)
		}
		c.Del(ctx, k)
	}
	if _, err := c.Get(ctx, key+":missing").Result(); err != redis.Nil {
		t.Fatalf("get of a missing key: err = %v, want redis.Nil", err)
	}
}
