package ingest

import (
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// benchDecode decodes rec (lines lines) b.N times, reporting the CPU time
// per line and the lines per CPU-second it implies.
func benchDecode(b *testing.B, in *Input, rec string, lines int) {
	d := in.NewDecoder(0, func(r Reason) { b.Fatalf("line dropped: %v", r) })
	v := []byte(rec)
	var n uint64
	fn := func(e *wire.Entry) { n += e.Count }
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	cpu0 := cpuNanos()
	for b.Loop() {
		if err := d.Decode(v, fn); err != nil {
			b.Fatal(err)
		}
	}
	if n != uint64(b.N*lines) && in.Format != "json" {
		b.Fatalf("%d accesses, want %d", n, b.N*lines)
	}
	cpu := float64(cpuNanos()-cpu0) / float64(b.N) / float64(lines)
	b.ReportMetric(cpu, "cpu-ns/line")
	if cpu > 0 {
		b.ReportMetric(1e9/cpu, "lines/cpu-s")
	}
}

const benchCombined = `203.0.113.195 - - [14/Nov/2023:22:13:20 +0000] "GET /item/1234567?ref=home&utm_source=mail HTTP/1.1" 200 5321 "https://shop.example.com/category/shoes?page=2" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36"`

func BenchmarkDecodeCombined(b *testing.B) {
	b.Run("preset", func(b *testing.B) {
		in := mustInput(b, `inputs: [{topic: a, format: combined}]`)
		benchDecode(b, in, benchCombined, 1)
	})
	b.Run("preset+source", func(b *testing.B) {
		in := mustInput(b, `inputs: [{topic: a, format: combined, source_field: remote_addr}]`)
		benchDecode(b, in, benchCombined, 1)
	})
	b.Run("template+where+clf", func(b *testing.B) {
		in := mustInput(b, `inputs: [{topic: a, format: combined, app: web, key: "{method}:{path}", where: {status: '^2'}, time: clf}]`)
		benchDecode(b, in, benchCombined, 1)
	})
	b.Run("extract", func(b *testing.B) {
		in := mustInput(b, `
inputs:
  - topic: a
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2'}
`)
		benchDecode(b, in, benchCombined, 1)
	})
}

const benchJSON = `{"ts_ms":1700000000123,"service":"checkout","method":"GET","request":{"uri":"/item/12345","headers":{"ua":"Mozilla/5.0 (X11; Linux x86_64)","accept":"*/*"}},"status":200,"size":5321,"n":1,"trace":"4bf92f3577b34da6a3ce929d0e0e4736"}`

func BenchmarkDecodeJSONMapped(b *testing.B) {
	in := mustInput(b, `
inputs:
  - topic: svc.json
    format: json
    fields: {key: request.uri, app: service, time: ts_ms, bytes: size, op: method, count: n}
    time: unix_ms
`)
	benchDecode(b, in, benchJSON, 1)
}

// BenchmarkDecodeJSONMappedSource is BenchmarkDecodeJSONMapped with a
// seventh path, the source.
func BenchmarkDecodeJSONMappedSource(b *testing.B) {
	in := mustInput(b, `
inputs:
  - topic: svc.json
    format: json
    fields: {key: request.uri, app: service, time: ts_ms, bytes: size, op: method, count: n, source: trace}
    time: unix_ms
`)
	benchDecode(b, in, benchJSON, 1)
}

func BenchmarkDecodeRegex(b *testing.B) {
	in := mustInput(b, `
inputs:
  - topic: regex.logs
    format: regex
    pattern: '^(?P<ip>\S+) (?P<verb>\S+) (?P<uri>\S+)$'
    key: "{uri}"
`)
	benchDecode(b, in, "203.0.113.195 GET /item/1234567?ref=home", 1)
}
