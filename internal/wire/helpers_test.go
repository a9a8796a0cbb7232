package wire_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// rec is a copy of a wire.Entry that outlives the callback.
type rec struct {
	App, Key string
	Count    uint64
	TS       int64
	Bytes    uint64
	Op       wire.Op
}

func copyEntry(e *wire.Entry) rec {
	return rec{App: string(e.App), Key: string(e.Key), Count: e.Count, TS: e.TS, Bytes: e.Bytes, Op: e.Op}
}

// decodeAll decodes value and returns copies of the entries it delivered.
func decodeAll(d *wire.Decoder, value []byte) ([]rec, error) {
	var got []rec
	err := d.Decode(value, func(e *wire.Entry) { got = append(got, copyEntry(e)) })
	return got, err
}

// hx decodes hex with spaces and '|' separators allowed, for readable
// binary test vectors.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// reasonOf returns the Reason of a *wire.Error, 0 for nil, and fails the
// test for any other error.
func reasonOf(t testing.TB, err error) (wire.Reason, *wire.Error) {
	t.Helper()
	if err == nil {
		return 0, nil
	}
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wire.Error", err, err)
	}
	return we.Reason, we
}
