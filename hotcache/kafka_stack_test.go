package hotcache

import (
	"context"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestReportSurvivesOutage: a batch sent while its broker is unreachable
// for 3 s, as a partition's old leader is until its successor is elected and
// learned, is retried until it lands, acknowledged by every in-sync replica,
// and not counted as failed. So is one sent while it is unreachable for
// longer than the Writer's own attempts last, as in a broker's restart: the
// Writer gives it up, and it is handed over again (reporter_resent_records_total)
// until it lands.
func TestReportSurvivesOutage(t *testing.T) {
	broker := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	if _, err := kafkaio.EnsureTopic(t.Context(), []string{broker}, topic, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 5 * time.Second}
		_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	var o outage
	tr := kafkaio.NewTransport(func() *kafka.Transport { // WriterTransport's, through the outage
		return &kafka.Transport{MetadataTTL: kafkaio.WriterMetadataTTL, MetadataTopics: []string{topic}, Dial: o.dial}
	})
	m := newMetrics(prometheus.NewRegistry())
	s := newKafkaSink([]string{broker}, topic, tr, defaultReportBuffer, kafkaio.DefaultRetryFor, m, slog.New(slog.DiscardHandler))
	defer s.close()
	if s.w.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks %v, want RequireAll", s.w.RequiredAcks)
	}
	// kafka-go's waits between the attempts: 50 ms, 200 ms, then 250 ms.
	var budget time.Duration
	for a := 1; a < reportAttempts; a++ {
		budget += min(time.Duration(a*a)*reportBackoffMin, reportBackoffMax)
	}
	// A leader change is followed by the Transport's renewal after a failed
	// attempt (kafkaio.TestTransportRenews), not by its timed refresh.
	if budget < 5*time.Second {
		t.Errorf("retry budget %v: want 5 s at least", budget)
	}

	send := func() {
		t.Helper()
		if err := s.send(t.Context(), []byte("batch")); err != nil {
			t.Fatal(err)
		}
	}
	settle := func() time.Duration {
		t.Helper()
		t0 := time.Now()
		for s.inflight.Load() != 0 {
			if time.Since(t0) > budget+5*time.Second {
				t.Fatalf("the batch still in flight after %v", time.Since(t0))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(t0)
	}
	send() // learns the cluster and opens the connections
	settle()
	o.set(true)
	send()
	time.Sleep(3 * time.Second)
	if s.inflight.Load() == 0 {
		t.Fatal("the batch completed while the broker was unreachable")
	}
	o.set(false)
	t.Logf("the batch landed %v after the broker came back", settle().Round(time.Millisecond))
	if n := testCounter(t, m.reportFailed); n != 0 {
		t.Errorf("%v records failed across a 3 s outage, want none", n)
	}

	// Past the Writer's attempts (each refused at once, so they last about
	// the budget).
	o.set(true)
	send()
	time.Sleep(budget + 2*time.Second)
	if s.inflight.Load() == 0 {
		t.Fatal("the batch completed while the broker was unreachable")
	}
	if n := testCounter(t, m.reportResent); n == 0 {
		t.Errorf("no batch handed over again %v into an outage, past the Writer's attempts", budget+2*time.Second)
	}
	o.set(false)
	t.Logf("after %v away, the batch landed %v after the broker came back, handed over %v times",
		budget+2*time.Second, settle().Round(time.Millisecond), testCounter(t, m.reportResent))
	if n := testCounter(t, m.reportFailed); n != 0 {
		t.Errorf("%v records failed across an outage longer than the attempts, want none", n)
	}
	client := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 5 * time.Second}
	res, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}})
	if err != nil || len(res.Topics[topic]) != 1 || res.Topics[topic][0].LastOffset != 3 {
		t.Errorf("topic's end offset: %+v, %v; want the three batches, 3", res, err)
	}
}

// outage is a kafka.Transport Dial whose connections fail as a dead
// broker's do while it is cut: a write on an open one is reset, a new one is
// refused.
type outage struct {
	mu  sync.Mutex
	cut bool
}

func (o *outage) set(cut bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cut = cut
}

func (o *outage) isCut() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

func (o *outage) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if o.isCut() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &outageConn{Conn: c, o: o}, nil
}

type outageConn struct {
	net.Conn
	o *outage
}

func (c *outageConn) Write(b []byte) (int, error) {
	if c.o.isCut() {
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return c.Conn.Write(b)
}
