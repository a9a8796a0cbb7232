package wire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// benchEntries returns n entries with realistic keys ("item:<id>", 9-14 bytes).
func benchEntries(n int) []wire.KeyCount {
	es := make([]wire.KeyCount, n)
	for i := range es {
		es[i] = wire.KeyCount{Key: fmt.Sprintf("item:%d", 1000+i*7919), Count: uint64(1 + i%300)}
	}
	return es
}

// perEntry reports ns/entry next to ns/op, and the process CPU time per
// entry since cpu0 (from cpuNanos) with the entries per CPU-second it implies.
func perEntry(b *testing.B, entries int, cpu0 int64) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(entries)
	b.ReportMetric(ns, "ns/entry")
	cpu := float64(cpuNanos()-cpu0) / float64(b.N) / float64(entries)
	b.ReportMetric(cpu, "cpu-ns/entry")
	if cpu > 0 {
		b.ReportMetric(1e9/cpu, "entries/cpu-s")
	}
}

func BenchmarkDecodeBinary(b *testing.B) {
	for _, n := range []int{10, 500} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			batch := wire.AppendBatch(nil, "shop", 1700000000000, benchEntries(n))
			benchDecode(b, batch, n)
		})
		b.Run(fmt.Sprintf("v2/entries=%d", n), func(b *testing.B) {
			es := benchEntries(n)
			as := make([]wire.Access, n)
			for i, e := range es {
				as[i] = wire.Access{Key: e.Key, Count: e.Count, Bytes: e.Count * 4096, Op: wire.Op(i % 2)}
			}
			benchDecode(b, wire.AppendAccesses(nil, "shop", 1700000000000, as), n)
		})
	}
}

func benchDecode(b *testing.B, batch []byte, n int) {
	var d wire.Decoder
	var sum uint64
	fn := func(e *wire.Entry) { sum += e.Count }
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		if err := d.Decode(batch, fn); err != nil {
			b.Fatal(err)
		}
	}
	perEntry(b, n, cpu0)
}

func BenchmarkDecodeJSON(b *testing.B) {
	for _, tc := range []struct{ name, in string }{
		{"minimal", `{"key":"item:42"}`},
		{"typical", `{"app":"shop","key":"item:123456","count":1,"ts":1700000000123}`},
		{"all fields", `{"key":"item:123456","app":"shop","count":3,"ts":1700000000123,"bytes":4096,"op":"write"}`},
		{"log line", `{"@timestamp":"2024-01-02T03:04:05.678Z","level":"info","msg":"cache get","key":"user:98765:profile","app":"web","ts":1700000000123,"host":"web-7","tags":["a","b"],"latency_ms":1.25}`},
		{"escaped key", `{"key":"caf\u00e9:\"42\"","app":"shop"}`},
		{"long key", `{"key":"` + strings.Repeat("k", 200) + `"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in := []byte(tc.in)
			var d wire.Decoder
			n := 0
			fn := func(e *wire.Entry) { n++ }
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			cpu0 := cpuNanos()
			for b.Loop() {
				if err := d.Decode(in, fn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func BenchmarkDecodeNDJSON(b *testing.B) {
	const lines = 100
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, `{"app":"shop","key":"item:%d","count":1,"ts":1700000000123}`+"\n", 1000+i*7919)
	}
	in := []byte(sb.String())
	var d wire.Decoder
	n := 0
	fn := func(e *wire.Entry) { n++ }
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		if err := d.Decode(in, fn); err != nil {
			b.Fatal(err)
		}
	}
	perEntry(b, lines, cpu0)
}

func BenchmarkAppendBatch(b *testing.B) {
	const n = 500
	entries := benchEntries(n)
	buf := wire.AppendBatch(nil, "shop", 1700000000000, entries)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		buf = wire.AppendBatch(buf[:0], "shop", 1700000000000, entries)
	}
	perEntry(b, n, cpu0)
}

// BenchmarkAppendAccesses encodes 500 version 2 entries, reads and writes
// with bytes, into a reused buffer: no allocation.
func BenchmarkAppendAccesses(b *testing.B) {
	const n = 500
	entries := make([]wire.Access, n)
	for i, e := range benchEntries(n) {
		entries[i] = wire.Access{Key: e.Key, Count: e.Count, Bytes: e.Count * 4096, Op: wire.Op(i % 2)}
	}
	buf := wire.AppendAccesses(nil, "shop", 1700000000000, entries)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		buf = wire.AppendAccesses(buf[:0], "shop", 1700000000000, entries)
	}
	perEntry(b, n, cpu0)
}

func BenchmarkAppendJSON(b *testing.B) {
	ev := wire.Event{App: "shop", Key: "item:123456", Count: 3, TS: 1700000000123}
	buf := wire.AppendJSON(nil, ev)
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.AppendJSON(buf[:0], ev)
	}
}

func BenchmarkDecodePartials(b *testing.B) {
	const apps, perApp = 4, 250
	batch := &wire.PartialBatch{Source: "detector-1", At: 1700000000500}
	for a := range apps {
		batch.Groups = append(batch.Groups, wire.PartialGroup{App: fmt.Sprintf("app-%d", a), Entries: benchEntries(perApp)})
	}
	body := wire.AppendPartials(nil, batch)
	var sum uint64
	fn := func(app, key []byte, c, w, by, wb uint64) { sum += c }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		if _, err := wire.DecodePartials(body, fn); err != nil {
			b.Fatal(err)
		}
	}
	perEntry(b, apps*perApp, cpu0)
}

// BenchmarkStdlibJSON is the baseline the hand-written scanner replaces:
// encoding/json decoding the "typical" record into a struct.
func BenchmarkStdlibJSON(b *testing.B) {
	in := []byte(`{"app":"shop","key":"item:123456","count":1,"ts":1700000000123}`)
	var v struct {
		App   string `json:"app"`
		Key   string `json:"key"`
		Count uint64 `json:"count"`
		TS    int64  `json:"ts"`
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		v = struct {
			App   string `json:"app"`
			Key   string `json:"key"`
			Count uint64 `json:"count"`
			TS    int64  `json:"ts"`
		}{}
		if err := json.Unmarshal(in, &v); err != nil {
			b.Fatal(err)
		}
	}
}
