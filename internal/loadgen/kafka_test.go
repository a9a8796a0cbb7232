package loadgen

import (
	"context"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestKafkaRoundTrip runs a short workload in each form against the real
// Kafka, reads every partition back and checks that what arrived is what the
// truth says was sent, key by key, and that every event arrived.
func TestKafkaRoundTrip(t *testing.T) {
	addr := stacktest.Kafka(t)
	for _, form := range []Form{FormBinary, FormJSON, FormNDJSON} {
		t.Run(form.String(), func(t *testing.T) {
			t.Parallel()
			topic := stacktest.Name(t)
			ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
			defer cancel()
			t0 := time.Now()
			n, err := kafkaio.EnsureTopic(ctx, []string{addr}, topic, 8)
			t.Logf("EnsureTopic took %v", time.Since(t0))
			if err != nil || n != 8 {
				t.Fatalf("EnsureTopic: %d partitions, %v; want 8, nil", n, err)
			}
			// Again: an existing topic is left alone.
			if n, err := kafkaio.EnsureTopic(ctx, []string{addr}, topic, 3); err != nil || n != 8 {
				t.Fatalf("EnsureTopic on an existing topic: %d partitions, %v; want 8, nil", n, err)
			}
			st, err := Run(ctx, Config{
				Brokers: []string{addr}, Topic: topic, Form: form,
				Rate: 4000, Keys: 2000, Skew: 1.1, Apps: 2, Threshold: 200,
				Flashes:  []Flash{{Key: "item:hot", Start: 300 * time.Millisecond, Ramp: 500 * time.Millisecond, Rate: 3000}},
				Duration: 1500 * time.Millisecond,
			})
			if err != nil {
				t.Fatalf("Run: %v (stats %+v)", err, st)
			}
			if st.FailedRecords != 0 || st.Events == 0 || len(st.Truth.Keys) < 2 {
				t.Fatalf("stats %+v: want events, no failures and tracked keys", st)
			}
			t.Logf("%s: ran %v, drained in %v", form, st.Elapsed, st.Drain)
			t0 = time.Now()
			values := readAll(ctx, t, addr, topic, 8)
			t.Logf("%s: read back in %v", form, time.Since(t0))
			checkAgainstTruth(t, values, st)
			t.Logf("%s: %d events in %d records (%d bytes), %d keys tracked", form, st.Events, st.Records, st.Bytes, len(st.Truth.Keys))
		})
	}
}

// readAll reads every record of every partition of topic, up to the end.
func readAll(ctx context.Context, t *testing.T, addr, topic string, partitions int) [][]byte {
	t.Helper()
	var values [][]byte
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
		if err != nil {
			t.Fatalf("dial partition %d: %v", p, err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatalf("last offset of partition %d: %v", p, err)
		}
		if last == 0 {
			t.Errorf("partition %d is empty: records should spread over all partitions", p)
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{addr}, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond,
		})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("read partition %d: %v", p, err)
			}
			values = append(values, m.Value)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return values
}
