package kafkaio

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// clientStats counts the requests a Group makes of the brokers, from
// kafka-go's own reader counters, so that a user can see what the detectors
// cost the brokers (fetches and bytes per second) next to what they count.
//
// kafka-go's Reader.Stats resets its counters on each call, so the totals
// here are the sums of every snapshot taken: at each scrape of the live
// readers and once when a reader closes. It is a prometheus.Collector.
type clientStats struct {
	mu                      sync.Mutex               // guards the fields below
	readers                 map[*kafka.Reader]string // open readers
	fetches, records, bytes float64
	commits                 float64 // OffsetCommit requests sent

	fetchesDesc, recordsDesc, bytesDesc, commitsDesc *prometheus.Desc
}

func newClientStats() *clientStats {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("hotspot", "kafka", name), help, nil, nil)
	}
	return &clientStats{
		readers:     make(map[*kafka.Reader]string),
		fetchesDesc: d("fetch_requests_total", "Fetch requests the detector's partition readers made of the brokers."),
		recordsDesc: d("fetched_records_total", "Records the detector's partition readers fetched."),
		bytesDesc:   d("fetched_bytes_total", "Bytes of record keys and values the detector's partition readers fetched."),
		commitsDesc: d("offset_commit_requests_total", "OffsetCommit requests the detector sent."),
	}
}

func (s *clientStats) open(r *kafka.Reader) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.readers[r] = ""
	s.mu.Unlock()
}

// closed takes the last snapshot of r, which must be closed already (its
// counters no longer move).
func (s *clientStats) closed(r *kafka.Reader) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.readers, r)
	s.add(r.Stats())
}

func (s *clientStats) committed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.commits++
	s.mu.Unlock()
}

func (s *clientStats) add(st kafka.ReaderStats) {
	s.fetches += float64(st.Fetches)
	s.records += float64(st.Messages)
	s.bytes += float64(st.Bytes)
}

// Describe implements prometheus.Collector.
func (s *clientStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.fetchesDesc
	ch <- s.recordsDesc
	ch <- s.bytesDesc
	ch <- s.commitsDesc
}

// Collect implements prometheus.Collector.
func (s *clientStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	for r := range s.readers {
		s.add(r.Stats())
	}
	f, n, b, c := s.fetches, s.records, s.bytes, s.commits
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(s.fetchesDesc, prometheus.CounterValue, f)
	ch <- prometheus.MustNewConstMetric(s.recordsDesc, prometheus.CounterValue, n)
	ch <- prometheus.MustNewConstMetric(s.bytesDesc, prometheus.CounterValue, b)
	ch <- prometheus.MustNewConstMetric(s.commitsDesc, prometheus.CounterValue, c)
}
