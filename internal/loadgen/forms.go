package loadgen

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/ingest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// The forms that hotspotd reads only through an input file (package
// ingest, hotspotd --input): access logs as operators ship them, not
// hotspot's own event format. InputFile gives each its input file, whose
// mapping yields exactly the generator's (app, key) for every line, with a
// count of 1 and op read, so that the Truth and the detectors agree.
//
// FormCombined, one line per access:
//
//	127.0.0.1 - <app> [02/Jan/2006:15:04:05 +0000] "GET /<app>/<key> HTTP/1.1" 200 512 "-" "hotspot-load"
//
// The combined format has no field for an app (a virtual host), and an input
// takes its app from a field of the line (app_field), not from a group of
// its extract pattern: so the app is remote_user, and the key is the path
// after /<app>/. time_local is the access's second in UTC; the input reads
// the time from the Kafka record's timestamp (as operators' inputs do, the
// default), which the generator sets to the access's time. Nothing is
// percent-encoded and ingest decodes nothing, so a key or app that a path
// cannot carry as it is (spaces, control characters, '"', '?', '\'; for an
// app also '/') is refused by Config.Check.
//
// FormMappedJSON, one object per access, shaped like a service's JSON access
// log, with fields nested and fields of no use to hotspotd:
//
//	{"ts_ms":1700000000120,"service":"<app>","request":{"method":"GET","uri":"/item/<key>","proto":"HTTP/1.1"},
//	 "response":{"status":200,"size":512},"duration_ms":3,"client":{"ip":"127.0.0.1"}}
//
// (on one line). The input maps app from service, the key from request.uri
// after /item/, the op from request.method, bytes from response.size and the
// time from ts_ms (unix_ms). Any valid UTF-8 key or app can go.

// logBytes is the response size every generated log line gives.
const logBytes = 512

// clfLayout is time_local's layout in a combined line.
const clfLayout = "02/Jan/2006:15:04:05 -0700"

// combinedInput and mappedJSONInput are the input files of FormCombined and
// FormMappedJSON: %[1]s is the topic; %[2]s and %[3]s are empty, or with
// sources a comment line and the setting that maps the source
// (sourceLines).
const (
	combinedInput = `# hotspotd --input for hotspot load --form combined (docs/loadgen.md):
# nginx/Apache combined log lines; the app is remote_user, the key the path
# after /<app>/; the time is the Kafka record's timestamp.%[2]s
inputs:
  - topic: "%[1]s"
    format: combined
    app_field: remote_user
    extract:
      field: path
      pattern: '^/[^/]+/(?P<key>.+)$'
    key: "{key}"
%[3]s`
	mappedJSONInput = `# hotspotd --input for hotspot load --form mapped-json (docs/loadgen.md):
# a service's JSON access log; the app is service, the key request.uri
# after /item/, the time ts_ms.%[2]s
inputs:
  - topic: "%[1]s"
    format: json
    app_field: service
    extract:
      field: request.uri
      pattern: '(?s)^/item/(?P<key>.+)$'
    key: "{key}"
    fields:
      time: ts_ms
      bytes: response.size
      op: request.method
%[3]s    time: unix_ms
`
	hotspotInput = `# hotspotd --input for hotspot load --form %s (docs/loadgen.md):
# hotspot's own wire format, as hotspotd reads without an input file.
inputs:
  - topic: "%s"
    format: hotspot
`
)

// sourceLines are the comment and the setting that the input file of
// FormCombined and FormMappedJSON add for a run with sources.
var sourceLines = [numForms][2]string{
	FormCombined:   {"\n# The source (--sources) is the client address, remote_addr.", "    source_field: remote_addr\n"},
	FormMappedJSON: {"\n# The source (--sources) is the client address, client.ip.", "      source: client.ip\n"},
}

// InputFile returns the input file (YAML, docs/ingest.md) with which
// hotspotd (--input FILE) reads the records of form f from topic, of a run
// without sources: for combined and mapped-json, the mapping that yields
// exactly the generator's (app, key), count and op for each line, and the
// access's time; for binary, json and ndjson, an input of format hotspot,
// as hotspotd reads without a file. The file is checked with ingest.Parse.
// Config.InputFile gives the file of a run with sources.
func InputFile(f Form, topic string) ([]byte, error) {
	return inputFile(f, topic, false)
}

// InputFile returns the input file of c's form and topic (the default
// topic when c has none): InputFile's, and with Sources, for combined and
// mapped-json, also the mapping of the source (the client address) that
// yields the instance's name, SourceName. One file serves runs with and
// without sources on a topic only for the forms of hotspot's own format:
// a combined or mapped-json line without sources names the client
// 127.0.0.1, which this file would count as a source.
func (c Config) InputFile() ([]byte, error) {
	return inputFile(c.Form, cmp.Or(c.Topic, hotset.DefaultTopic), c.Sources > 0)
}

func inputFile(f Form, topic string, sources bool) ([]byte, error) {
	var s string
	var lines [2]string
	if sources && f < numForms {
		lines = sourceLines[f]
	}
	switch f {
	case FormBinary, FormJSON, FormNDJSON:
		s = fmt.Sprintf(hotspotInput, f, topic)
	case FormCombined:
		s = fmt.Sprintf(combinedInput, topic, lines[0], lines[1])
	case FormMappedJSON:
		s = fmt.Sprintf(mappedJSONInput, topic, lines[0], lines[1])
	default:
		return nil, fmt.Errorf("loadgen: unknown %v", f)
	}
	if !validTopic(topic) {
		return nil, fmt.Errorf("loadgen: %q is not a Kafka topic name (1 to 249 of a-z A-Z 0-9 . _ -)", topic)
	}
	if _, err := ingest.Parse([]byte(s)); err != nil {
		return nil, fmt.Errorf("loadgen: the input file of form %s: %w", f, err)
	}
	return []byte(s), nil
}

// validTopic reports whether s is a legal Kafka topic name (so that it goes
// into the YAML as it is).
func validTopic(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == ""
}

// checkCarried reports a key or app of the workload that c.Form cannot
// carry so that its input file gives it back unchanged.
func (c Config) checkCarried() error {
	if c.Form != FormCombined && c.Form != FormMappedJSON {
		return nil
	}
	for _, app := range c.appNames() {
		if err := c.Form.carries("app", app); err != nil {
			return err
		}
	}
	if c.Rate > 0 {
		// Background keys are the prefix and digits.
		if err := c.Form.carries("key prefix", c.KeyPrefix+"1"); err != nil {
			return err
		}
	}
	for i, f := range c.Flashes {
		if f.App != "" {
			if err := c.Form.carries("app", f.App); err != nil {
				return fmt.Errorf("%w (flash %d)", err, i)
			}
		}
		if err := c.Form.carries("key", f.Key); err != nil {
			return fmt.Errorf("%w (flash %d)", err, i)
		}
	}
	return nil
}

// carries reports why form f cannot carry s, the key or app (what).
func (f Form) carries(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("loadgen: form %s cannot carry the %s %q: not valid UTF-8", f, what, s)
	}
	if f != FormCombined {
		return nil
	}
	for i := range len(s) {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f || c == '"' || c == '?' || c == '\\' || c == '/' && what == "app":
			return fmt.Errorf("loadgen: form combined cannot carry the %s %q: it holds %q, which a combined line's path (and remote_user, for an app) "+
				"cannot hold as it is; nothing is percent-encoded (keys and apps without spaces, control characters, '\"', '?' or '\\', and apps without '/')",
				what, s, string(c))
		}
	}
	return nil
}

// noSource is the client address of the log forms' lines without sources.
const noSource = "127.0.0.1"

// appendCombined appends the combined log line of an access at ts from
// the address src ("": noSource).
func (g *generator) appendCombined(dst []byte, app, key string, ts int64, src string) []byte {
	if sec := ts / 1000; sec != g.clfSec || g.clf == nil {
		g.clfSec = sec
		g.clf = time.Unix(sec, 0).UTC().AppendFormat(g.clf[:0], clfLayout)
	}
	if src == "" {
		src = noSource
	}
	dst = append(dst, src...)
	dst = append(dst, " - "...)
	dst = append(dst, app...)
	dst = append(dst, " ["...)
	dst = append(dst, g.clf...)
	dst = append(dst, `] "GET /`...)
	dst = append(dst, app...)
	dst = append(dst, '/')
	dst = append(dst, key...)
	dst = append(dst, ` HTTP/1.1" 200 `...)
	dst = strconv.AppendInt(dst, logBytes, 10)
	return append(dst, ` "-" "hotspot-load"`...)
}

// appendMappedJSON appends the JSON access-log object of an access at ts
// from the address src ("": noSource).
func appendMappedJSON(dst []byte, app, key string, ts int64, src string) []byte {
	dst = append(dst, `{"ts_ms":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, `,"service":`...)
	dst = append(dst, '"')
	dst = wire.AppendJSONText(dst, app)
	dst = append(dst, '"')
	dst = append(dst, `,"request":{"method":"GET","uri":"/item/`...)
	dst = wire.AppendJSONText(dst, key)
	dst = append(dst, `","proto":"HTTP/1.1"},"response":{"status":200,"size":`...)
	dst = strconv.AppendInt(dst, logBytes, 10)
	dst = append(dst, `},"duration_ms":3,"client":{"ip":"`...)
	if src == "" {
		src = noSource
	}
	dst = append(dst, src...)
	return append(dst, `"}}`...)
}
