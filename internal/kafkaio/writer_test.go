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
// next one first tries a fresh kafka.Transport. One that cannot learn the
// cluster layout is dropped and the current one stays; one that can takes
// over and serves that request. Requests that do not fail renew nothing.
func TestTransportRenews(t *testing.T) {
	broker := stacktest.Kafka(t)
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
				return d.DialContext(ctx, network, addr)
			}}
	})
	defer tr.CloseIdleConnections()
	addr := kafka.TCP(broker)
	roundTrip := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := tr.RoundTrip(ctx, addr, &metaapi.Request{})
		return err
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
