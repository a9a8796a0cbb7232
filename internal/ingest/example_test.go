package ingest_test

import (
	"fmt"

	"github.com/hotspot-dev/hotspot/internal/ingest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

func Example() {
	cfg, err := ingest.Parse([]byte(`
inputs:
  - topic: web.access
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2'}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	in := &cfg.Inputs[0]
	dropped := map[string]int{}
	d := in.NewDecoder(0, func(r ingest.Reason) { dropped[r.String()]++ })
	record := `127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /item/42?x=1 HTTP/1.1" 200 2326 "-" "curl/8.0"
127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /item/7 HTTP/1.1" 404 0 "-" "curl/8.0"
127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "POST /cart HTTP/1.1" 200 12 "-" "curl/8.0"`
	err = d.Decode([]byte(record), func(e *wire.Entry) {
		fmt.Printf("app %s key %s op %s bytes %d\n", e.App, e.Key, e.Op, e.Bytes)
	})
	fmt.Println(dropped, err)
	// Output:
	// app web key item:42 op read bytes 2326
	// map[filtered:1 unmatched:1] ingest: unmatched at byte 182: extract: the pattern does not match the field path
}
