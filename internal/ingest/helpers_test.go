package ingest

import (
	"errors"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// access is a delivered wire.Entry, copied.
type access struct {
	App, Key string
	Count    uint64
	TS       int64
	Bytes    uint64
	Op       wire.Op
	Src      string
}

func copyEntry(e *wire.Entry) access {
	return access{App: string(e.App), Key: string(e.Key), Count: e.Count, TS: e.TS, Bytes: e.Bytes, Op: e.Op, Src: string(e.Src)}
}

// mustInput parses a file of one input and returns it.
func mustInput(t testing.TB, yml string) *Input {
	t.Helper()
	cfg, err := Parse([]byte(yml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(cfg.Inputs) != 1 {
		t.Fatalf("Parse: %d inputs, want 1", len(cfg.Inputs))
	}
	return &cfg.Inputs[0]
}

// decodeResult is what one Decode call did.
type decodeResult struct {
	got     []access
	reasons []Reason
	err     error
}

func decode(in *Input, maxKeyLen int, rec string) decodeResult {
	var r decodeResult
	d := in.NewDecoder(maxKeyLen, func(rs Reason) { r.reasons = append(r.reasons, rs) })
	r.err = d.Decode([]byte(rec), func(e *wire.Entry) { r.got = append(r.got, copyEntry(e)) })
	return r
}

// errReason returns the Reason of an *Error, or 0.
func errReason(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return 0
}
