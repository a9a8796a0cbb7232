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
// truth says was sent, key by key, and that every event arrived. The
// mapped forms are decoded with their input files, and their records carry
// the time of their accesses as Kafka timestamp.
func TestKafkaRoundTrip(t *testing.T) {
	addr := stacktest.Kafka(t)
	for form := range numForms {
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
			recs := readAll(ctx, t, addr, topic, 8)
			t.Logf("%s: read back in %v", form, time.Since(t0))
			if form == FormCombined || form == FormMappedJSON {
				checkMappedRecords(t, form, recs, st)
			} else {
				values := make([][]byte, len(recs))
				for i, r := range recs {
					values[i] = r.Value
				}
				checkAgainstTruth(t, values, st)
			}
			t.Logf("%s: %d events in %d records (%d bytes), %d keys tracked", form, st.Events, st.Records, st.Bytes, len(st.Truth.Keys))
		})
	}
}

// TestKafkaSinkDurable: records are acknowledged by every in-sync replica,
// and a batch is retried for more than 5 s, over which the Transport asks
// for the cluster layout twice at least: a partition's leader change loses
// nothing.
func TestKafkaSinkDurable(t *testing.T) {
	s, err := newKafkaSink(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", MaxInflight: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.w.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks %v, want RequireAll", s.w.RequiredAcks)
	}
	var wait time.Duration // kafka-go sleeps attempt²·min, at most max, before retry number attempt
	for a := 1; a < s.w.MaxAttempts; a++ {
		wait += min(time.Duration(a*a)*s.w.WriteBackoffMin, s.w.WriteBackoffMax)
	}
	if _, ok := s.w.Transport.(*kafkaio.Transport); !ok {
		t.Fatalf("Transport %#v, want kafkaio.WriterTransport's", s.w.Transport)
	}
	// A leader change is followed by the Transport's renewal after a failed
	// attempt (kafkaio.TestTransportRenews), not by its timed refresh.
	if wait < 5*time.Second {
		t.Errorf("retries wait %v in all; want 5 s at least", wait)
	}
}

// checkMappedRecords decodes the records of a mapped form, as read back
// from Kafka, with the form's input file and compares them with the truth;
// each record's Kafka timestamp must be the start of a tick of the run.
func checkMappedRecords(t *testing.T, form Form, recs []Record, st Stats) {
	t.Helper()
	totals := make(map[AppKey]uint64)
	var events int64
	end := st.Truth.StartMs + int64(st.Truth.Slots)*st.Truth.SlotMs
	for i, accs := range decodeInput(t, form, false, recs) {
		if ts := recs[i].TimeMs; ts < st.Truth.StartMs || ts >= end || (ts-st.Truth.StartMs)%10 != 0 {
			t.Fatalf("record %d: Kafka timestamp %d, want the start of a 10 ms tick in [%d, %d)", i, ts, st.Truth.StartMs, end)
		}
		for _, a := range accs {
			totals[AppKey{a.App, a.Key}] += a.Count
			events += int64(a.Count)
		}
	}
	if events != st.Events || int64(len(recs)) != st.Records {
		t.Errorf("decoded %d events in %d records; stats say %d, %d", events, len(recs), st.Events, st.Records)
	}
	for ak, want := range st.Truth.Totals() {
		if got := totals[ak]; got != want {
			t.Errorf("key %v: %d events decoded, truth says %d", ak, got, want)
		}
	}
}

// readAll reads every record of every partition of topic, up to the end:
// its value and Kafka timestamp.
func readAll(ctx context.Context, t *testing.T, addr, topic string, partitions int) []Record {
	t.Helper()
	var values []Record
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
			values = append(values, Record{Value: m.Value, TimeMs: m.Time.UnixMilli()})
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return values
}
