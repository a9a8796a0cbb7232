package wire_test

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// The worked example of docs/wire.md.
func ExampleAppendBatch() {
	b := wire.AppendBatch(nil, "shop", 1700000000000, []wire.KeyCount{{Key: "item:42", Count: 3}, {Key: "cart:7", Count: 300}})
	fmt.Println(hex.EncodeToString(b))

	var d wire.Decoder
	err := d.Decode(b, func(e *wire.Entry) {
		fmt.Printf("app=%s key=%s count=%d ts=%d\n", e.App, e.Key, e.Count, e.TS)
	})
	fmt.Println(err)
	// Output:
	// a5010473686f7080d095ffbc3102076974656d3a34320306636172743a37ac02
	// app=shop key=item:42 count=3 ts=1700000000000
	// app=shop key=cart:7 count=300 ts=1700000000000
	// <nil>
}

// The worked example of docs/wire.md: a version 2 batch of two reads of
// item:42 (12 KiB in all), one write of it (4 KiB) and 300 reads of cart:7
// whose size was not known.
func ExampleAppendAccesses() {
	b := wire.AppendAccesses(nil, "shop", 1700000000000, []wire.Access{
		{Key: "item:42", Count: 3, Bytes: 12288, Op: wire.OpRead},
		{Key: "item:42", Count: 1, Bytes: 4096, Op: wire.OpWrite},
		{Key: "cart:7", Count: 300},
	})
	fmt.Println(hex.EncodeToString(b))

	var d wire.Decoder
	err := d.Decode(b, func(e *wire.Entry) {
		fmt.Printf("app=%s key=%s count=%d op=%v bytes=%d ts=%d\n", e.App, e.Key, e.Count, e.Op, e.Bytes, e.TS)
	})
	fmt.Println(err)
	// Output:
	// a5020473686f7080d095ffbc3103076974656d3a343203008060076974656d3a34320101802006636172743a37ac020000
	// app=shop key=item:42 count=3 op=read bytes=12288 ts=1700000000000
	// app=shop key=item:42 count=1 op=write bytes=4096 ts=1700000000000
	// app=shop key=cart:7 count=300 op=read bytes=0 ts=1700000000000
	// <nil>
}

// The worked example of docs/wire.md.
func ExampleAppendPartials() {
	b := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d1", At: 1700000000500, Span: 100, End: 1700000000450, Seq: 7, Groups: []wire.PartialGroup{
		{App: "shop", Entries: []wire.KeyCount{{Key: "item:42", Count: 1500}}},
		{App: "ads", Entries: []wire.KeyCount{{Key: "b", Count: 2, Writes: 1, Bytes: 300, WriteBytes: 100}}},
	}})
	fmt.Println(hex.EncodeToString(b))

	h, err := wire.DecodePartials(b, func(app, key []byte, n, writes, bytes, writeBytes uint64) {
		fmt.Printf("%s %s %d accesses, %d writes, %d bytes, %d written\n", app, key, n, writes, bytes, writeBytes)
	})
	fmt.Println(h.Source, h.At, h.Span, h.End, h.Seq, err)
	// Output:
	// a605026431f4d395ffbc3164c2d395ffbc310700020473686f7001076974656d3a3432b817036164730101620501ac0264
	// shop item:42 1500 accesses, 0 writes, 0 bytes, 0 written
	// ads b 2 accesses, 1 writes, 300 bytes, 100 written
	// d1 1700000000500 100 1700000000450 7 <nil>
}

func ExampleDecoder_Decode() {
	d := wire.Decoder{OnInvalid: func(e *wire.Error) { fmt.Println("invalid:", e.Reason) }}
	record := []byte(`{"key":"item:42","app":"shop","count":2}
{"key":""}
{"key":"cart:7","op":"write"}`)
	err := d.Decode(record, func(e *wire.Entry) {
		fmt.Printf("app=%s key=%s count=%d op=%v\n", e.App, e.Key, e.Count, e.Op)
	})
	var we *wire.Error
	if errors.As(err, &we) {
		fmt.Println(we.Reason, we.Offset, we.Skipped)
	}
	// Output:
	// app=shop key=item:42 count=2 op=read
	// invalid: empty_key
	// app=default key=cart:7 count=1 op=write
	// empty_key 48 1
}
