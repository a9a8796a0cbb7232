package kafkaio

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metaapi "github.com/segmentio/kafka-go/protocol/metadata"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestTransportRenews, on the local broker: once a request has failed
// without an answer (every dial refused, as by a broker just killed), the
// next produce request first tries a fresh kafka.Transport. One that cannot
// learn the cluster layout is dropped and the current one stays; one that
// can takes over and serves that request. Requests that do not fail renew
// nothing, and neither does a metadata request (WriteMessages's lookup of
// the partitions, on its caller's goroutine), which is answered from the
// cached layout.
func TestTransportRenews(t *testing.T) {
	broker := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	if _, err := EnsureTopic(context.Background(), []string{broker}, topic, 1); err != nil {
		t.Fatal(err)
	}
	var cut atomic.Bool
	var made atomic.Int32
	tr := NewTransport(func() *kafka.Transport {
		made.Add(1)
		return &kafka.Transport{MetadataTTL: time.Hour, DialTimeout: time.Second,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if cut.Load() {
					return nil, errors.New("refused")
				}
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &cuttable{Conn: c, cut: &cut}, nil
			}}
	})
	defer tr.CloseIdleConnections()
	addr := kafka.TCP(broker)
	client := &kafka.Client{Addr: addr, Transport: tr}
	roundTrip := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		res, err := client.Produce(ctx, &kafka.ProduceRequest{Topic: topic, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("x"))})})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		return err
	}
	metadata := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := tr.RoundTrip(ctx, addr, &metaapi.Request{})
		return err
	}
	if err := roundTrip(); err != nil { // learns the layout
		t.Fatal(err)
	}
	current := func() *kafka.Transport {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.cur.tr
	}
	first := current()
	cut.Store(true)
	if roundTrip() == nil {
		t.Fatal("a request with every dial refused succeeded")
	}
	if made.Load() != 1 {
		t.Fatalf("%d kafka.Transports made by a failed request, want the first alone", made.Load())
	}
	time.Sleep(renewEvery)
	if roundTrip() == nil {
		t.Fatal("a request with every dial refused succeeded")
	}
	if made.Load() != 2 || current() != first {
		t.Fatalf("%d kafka.Transports made, the first current: %v; want a second one tried and dropped", made.Load(), current() == first)
	}
	cut.Store(false)
	time.Sleep(renewEvery)
	if err := metadata(); err != nil || made.Load() != 2 {
		t.Fatalf("a metadata request while stale: %v, %d kafka.Transports made; want it answered from the cached layout, no renewal", err, made.Load())
	}
	if err := roundTrip(); err != nil {
		t.Fatalf("the request after the broker came back: %v", err)
	}
	if made.Load() != 3 || current() == first {
		t.Fatalf("%d kafka.Transports made, the first still current: %v; want a third one current", made.Load(), current() == first)
	}
	time.Sleep(renewEvery)
	if err := roundTrip(); err != nil || made.Load() != 3 {
		t.Fatalf("a request after a success: %v, %d kafka.Transports made; want it answered, no renewal", err, made.Load())
	}
}

// cuttable is a connection that is reset, as a dead broker's is, when cut.
type cuttable struct {
	net.Conn
	cut *atomic.Bool
}

func (c *cuttable) Write(b []byte) (int, error) {
	if c.cut.Load() {
		c.Conn.Close()
		return 0, errors.New("reset")
	}
	return c.Conn.Write(b)
}

// TestLeaderMoved: a produce response naming a partition's leader as moved
// renews the Transport; one without errors, or with another error, does not.
func TestLeaderMoved(t *testing.T) {
	res := func(code kafka.Error) kafka.Response {
		return &produceapi.Response{Topics: []produceapi.ResponseTopic{{Topic: "t",
			Partitions: []produceapi.ResponsePartition{{Partition: 0}, {Partition: 1, ErrorCode: int16(code)}}}}}
	}
	for code, want := range map[kafka.Error]bool{
		0: false, kafka.NotLeaderForPartition: true, kafka.LeaderNotAvailable: true,
		kafka.FencedLeaderEpoch: true, kafka.NotEnoughReplicas: false, kafka.MessageSizeTooLarge: false,
	} {
		if got := leaderMoved(res(code)); got != want {
			t.Errorf("leaderMoved(%v) = %v, want %v", code, got, want)
		}
	}
	if leaderMoved(&metaapi.Response{}) || leaderMoved(nil) {
		t.Error("leaderMoved of a metadata response or none, want false")
	}
}
