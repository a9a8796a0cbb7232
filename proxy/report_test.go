package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// reported is what the reports of one key said, summed.
type reported struct {
	reads, readBytes, writes, writeBytes uint64
	odd                                  uint64 // read counts that are not a multiple of the sampling weight
}

// reportTopic creates a one-partition topic for a proxy's reports, deleted
// when the test ends.
func reportTopic(t *testing.T, broker, topic string) string {
	t.Helper()
	if _, err := kafkaio.EnsureTopic(t.Context(), []string{broker}, topic, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 5 * time.Second}
		_, _ = cl.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	return topic
}

// readReports sums the access reports on topic per key, up to the
// topic's end; weight is the sampling weight every read count must be a
// multiple of.
func readReports(t *testing.T, broker, topic string, weight uint64) map[string]*reported {
	t.Helper()
	end := stacktest.EndOffset(t, broker, topic)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20,
		MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	got := map[string]*reported{}
	var d wire.Decoder
	for next := int64(0); next < end; {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read reports: %v", err)
		}
		next = m.Offset + 1
		if err := d.Decode(m.Value, func(e *wire.Entry) {
			k := string(e.Key)
			if got[k] == nil {
				got[k] = &reported{}
			}
			g := got[k]
			switch e.Op {
			case wire.OpRead:
				g.reads += e.Count
				g.readBytes += e.Bytes
				if e.Count%weight != 0 {
					g.odd++
				}
			case wire.OpWrite:
				g.writes += e.Count
				g.writeBytes += e.Bytes
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestReportsToKafka reads the proxy's reports off a topic of its own:
// every key a command reads or writes, from the first command on, with the
// bytes of the value (GET), of the reply (other reads) or of the arguments
// after the key (writes). With --report-sample 4 a read is counted one time
// in four with weight 4, and every write still counts.
func TestReportsToKafka(t *testing.T) {
	broker, redisAddr := stacktest.Kafka(t), newFakeRedis(t).addr()
	for _, sample := range []int{1, 4} {
		name := stacktest.Name(t)
		topic := reportTopic(t, broker, name)
		p := startProxy(t, redisAddr, func(c *Config) {
			c.Brokers, c.Topic, c.ReportSample = []string{broker}, topic, sample
		})
		a, b, w := name+":a", name+":b", name+":w"
		c := dialRaw(t, p.addr)
		c.do("SET", a, "12345")
		c.do("SET", b, "xy")
		c.do("SET", w, "abc")
		const n = 4000
		for range n / 100 {
			for range 100 {
				c.send("GET", a)
			}
			for range 100 {
				if got := string(c.read()); got != "$5\r\n12345\r\n" {
					t.Fatalf("GET %s: %q", a, got)
				}
			}
		}
		c.do("MGET", a, b)
		c.do("DEL", w)
		c.close()

		p.stop() // its Clients flush their reports as they close

		got := readReports(t, broker, topic, uint64(sample))
		ga, gb, gw := got[a], got[b], got[w]
		if ga == nil || gb == nil || gw == nil {
			t.Fatalf("--report-sample %d: reported %v; want %s, %s and %s", sample, got, a, b, w)
		}
		if gw.writes != 2 || gw.writeBytes != 3 || gw.reads != 0 || ga.writes != 1 || ga.writeBytes != 5 {
			t.Errorf("--report-sample %d: %s reported as %+v, %s as %+v; want 2 writes of 3 bytes, and one of 5",
				sample, w, *gw, a, *ga)
		}
		if ga.odd != 0 || gb.odd != 0 {
			t.Errorf("--report-sample %d: read counts not in steps of %d: %s %+v, %s %+v", sample, sample, a, *ga, b, *gb)
		}
		switch sample {
		case 1:
			// A GET counts the value's 5 bytes; MGET its reply's 23, shared by its two keys.
			if ga.reads != n+1 || ga.readBytes != 5*n+11 || gb.reads != 1 || gb.readBytes != 11 {
				t.Errorf("%s reported as %+v, %s as %+v; want %d reads of %d bytes, and 1 of 11", a, *ga, b, *gb, n+1, 5*n+11)
			}
		default:
			if ga.reads < n*85/100 || ga.reads > n*115/100 || ga.readBytes < ga.reads*5 || ga.readBytes > ga.reads*5+4*6 {
				t.Errorf("--report-sample %d: %s reported as %+v; want about %d reads of 5 bytes", sample, a, *ga, n)
			}
		}
	}
}

// TestServesWithoutCommandTable: a proxy whose Redis user may not run
// COMMAND serves after its wait, passing every command through unreported;
// once the user may, the table is read and reads are reported again. Its
// Redis is a fake that refuses COMMAND as an ACL would.
func TestServesWithoutCommandTable(t *testing.T) {
	broker, rs := stacktest.Kafka(t), newFakeRedis(t)
	rs.setCommandErr("-NOPERM this user has no permissions to run the 'command' command\r\n")
	topic := reportTopic(t, broker, stacktest.Name(t))
	start := time.Now()
	p := startProxy(t, rs.addr(), func(c *Config) {
		c.Brokers, c.Topic, c.CommandTableWait = []string{broker}, topic, 200*time.Millisecond
	})
	t.Logf("serving %v after the start, without the table", time.Since(start).Round(time.Millisecond))
	c := dialRaw(t, p.addr)
	defer c.close()
	before, after := topic+":before", topic+":after"
	if got := string(c.do("SET", before, "v")); got != "+OK\r\n" {
		t.Fatalf("SET through the proxy: %q", got)
	}
	if got := string(c.do("GET", before)); got != "$1\r\nv\r\n" {
		t.Fatalf("GET through the proxy: %q", got)
	}
	if n := infoField(t, p.addr, "command_table"); n != 0 {
		t.Errorf("HOTSPOT INFO command_table:%d without the table, want 0", n)
	}
	rs.setCommandErr("")
	// The table is asked again after 0.1, 0.2, 0.4, 0.8 s... of back-off.
	waitUntil(t, 10*time.Second, "the COMMAND table", func() bool { return infoField(t, p.addr, "command_table") == 1 })
	c.do("GET", after)
	p.stop()
	got := readReports(t, broker, topic, 1)
	if got[before] != nil {
		t.Errorf("%s, read before the table was there, reported as %+v", before, *got[before])
	}
	if got[after] == nil || got[after].reads == 0 {
		t.Errorf("%s, read once the table could be read, not reported (%v)", after, got)
	}
}
