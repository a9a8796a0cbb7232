package detector

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// corpus is a mix of good and bad access records spread over partitions,
// with what a detector must make of them.
type corpus struct {
	records [][][]byte        // per partition
	want    map[string]uint64 // "app/key" -> accesses
	invalid map[string]int    // reason -> records or lines rejected
	entries int               // good (key, count) entries
}

// testMaxKeyLen is the MaxKeyLen detectors under test use, so that
// oversized keys are cheap to make.
const testMaxKeyLen = 64

// newCorpus makes n records per partition. Expectations come from decoding
// each record with a wire.Decoder configured as the detector's; the corpus
// is checked to hold every kind of bad record the detector must survive.
func newCorpus(t testing.TB, partitions, n int, seed uint64) corpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	key := func() string { return fmt.Sprintf("item:%d", rng.IntN(40)) }
	app := func() string { return []string{"", "shop", "cart"}[rng.IntN(3)] }
	makers := []func() []byte{
		func() []byte { return wire.AppendJSON(nil, wire.Event{Key: key()}) },
		func() []byte {
			return wire.AppendJSON(nil, wire.Event{App: app(), Key: key(), Count: uint64(1 + rng.IntN(9)), TS: 1_700_000_000_000, Op: wire.OpWrite})
		},
		func() []byte { // newline-separated JSON with one bad line
			var b []byte
			b = wire.AppendJSON(b, wire.Event{App: app(), Key: key(), Count: 3})
			b = append(b, '\n')
			b = append(b, `{"key":"x","count":"three"}`...)
			b = append(b, '\n')
			b = wire.AppendJSON(b, wire.Event{Key: key()})
			return append(b, '\n')
		},
		func() []byte {
			es := make([]wire.KeyCount, 1+rng.IntN(20))
			for i := range es {
				es[i] = wire.KeyCount{Key: key(), Count: uint64(1 + rng.IntN(100))}
			}
			return wire.AppendBatch(nil, app(), 1_700_000_000_000, es)
		},
		func() []byte { return []byte{0xff, 0x00, 0x13, 0x37} },                                  // garbage
		func() []byte { return []byte("GET /item/42 HTTP/1.1") },                                 // not JSON
		func() []byte { return []byte(`{"key":42}`) },                                            // wrong type
		func() []byte { return []byte(`{"app":"shop"}`) },                                        // missing key
		func() []byte { return wire.AppendJSON(nil, wire.Event{Key: strings.Repeat("k", 100)}) }, // oversized key
		func() []byte { // a batch holding an oversized key: rejected whole
			return wire.AppendBatch(nil, "shop", 0, []wire.KeyCount{{Key: "ok", Count: 1}, {Key: strings.Repeat("k", 100), Count: 1}})
		},
		func() []byte { // truncated batch
			b := wire.AppendBatch(nil, "shop", 0, []wire.KeyCount{{Key: key(), Count: 5}, {Key: key(), Count: 6}})
			return b[:len(b)-3]
		},
		func() []byte { // unknown version
			b := wire.AppendBatch(nil, "shop", 0, []wire.KeyCount{{Key: key(), Count: 5}})
			b[1] = 0x7e
			return b
		},
		func() []byte { return nil }, // empty
	}
	c := corpus{records: make([][][]byte, partitions), want: map[string]uint64{}, invalid: map[string]int{}}
	dec := wire.Decoder{MaxKeyLen: testMaxKeyLen, OnInvalid: func(e *wire.Error) { c.invalid[e.Reason.String()]++ }}
	for p := range partitions {
		for i := range n {
			// Every maker at least once per partition, then at random.
			v := makers[i%len(makers)]()
			if i >= len(makers) {
				v = makers[rng.IntN(len(makers))]()
			}
			c.records[p] = append(c.records[p], v)
			err := dec.Decode(v, func(e *wire.Entry) {
				c.want[string(e.App)+"/"+string(e.Key)] += e.Count
				c.entries++
			})
			var we *wire.Error
			if err != nil && !errors.As(err, &we) {
				t.Fatalf("decode returned %T, want *wire.Error", err)
			}
		}
	}
	for _, r := range []string{"bad_magic", "not_json", "wrong_type", "missing_key", "key_too_long", "truncated", "unknown_version", "empty"} {
		if c.invalid[r] == 0 {
			t.Fatalf("corpus has no record rejected as %s: %v", r, c.invalid)
		}
	}
	return c
}

// checkInvalid compares the detector's invalid-record counters with want.
func checkInvalid(t testing.TB, d *Detector, want map[string]int) {
	t.Helper()
	for _, r := range wire.Reasons() {
		if got := int(testutil.ToFloat64(d.m.invalidFor(r))); got != want[r.String()] {
			t.Errorf("hotspot_events_invalid_total{reason=%q} = %d, want %d", r, got, want[r.String()])
		}
	}
}

// diffSums describes how got differs from want, or returns "".
func diffSums(got, want map[string]uint64) string {
	var b strings.Builder
	for k, w := range want {
		if got[k] != w {
			fmt.Fprintf(&b, "%s: got %d, want %d; ", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "%s: got %d, want none; ", k, g)
		}
	}
	return b.String()
}
