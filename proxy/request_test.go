package proxy

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// chunkReader returns its data a few bytes at a time.
type chunkReader struct {
	data  []byte
	sizes []byte // the size of each read, in turn (0 counts as 1)
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = max(1, int(r.sizes[r.i%len(r.sizes)]))
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// readAll reads every command from r and the error that ended them,
// copying each (the reader reuses its buffer).
func readAll(r io.Reader, budget int) ([][][]byte, error) {
	used := 0
	rd := newReqReader(r, func(n int) bool {
		if used+n > budget {
			return false
		}
		used += n
		return true
	}, func(n int) { used -= n })
	defer rd.close()
	var out [][][]byte
	for {
		cmds, err := rd.ReadCommands()
		for _, c := range cmds {
			var args [][]byte
			for _, a := range c.Args {
				args = append(args, slices.Clone(a))
			}
			out = append(out, args)
			// Raw is the command's RESP form: it parses to the same arguments.
			again, _, _, perr := parseMultibulk(c.Raw, &mbState{})
			if perr != nil || !slices.EqualFunc(again.Args, c.Args, bytes.Equal) {
				panic("Raw does not parse to Args")
			}
		}
		if err != nil {
			return out, err
		}
	}
}

func sameResult(t *testing.T, what string, c1, c2 [][][]byte, e1, e2 error) {
	t.Helper()
	var p1, p2 *protoError
	errors.As(e1, &p1)
	errors.As(e2, &p2)
	if len(c1) != len(c2) || (p1 == nil) != (p2 == nil) || (p1 != nil && p1.msg != p2.msg) {
		t.Fatalf("%s: %d commands and %v, against %d and %v", what, len(c1), e1, len(c2), e2)
	}
	for i := range c1 {
		if !slices.EqualFunc(c1[i], c2[i], bytes.Equal) {
			t.Fatalf("%s: command %d %q, against %q", what, i, c1[i], c2[i])
		}
	}
}

// FuzzReqReader: whatever the bytes, and however they are cut into reads,
// the reader returns the same commands and the same error, and each
// command's Raw parses to its arguments.
func FuzzReqReader(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING\r\nECHO \"a\\x41\" 'b\\'c'\r\n", "*-1\r\n\r\n*0\r\nPING\n",
		"*1\r\n$4\r\nPINGxx", "*3000000000\r\n", "*1\r\n$-1\r\n", "\"open\r\n", "*2\r\n$1\r\na\r\n+b\r\n",
		"SET k \"v\"x\r\n", "*1\r\n$0\r\n\r\nGET a\x00b\r\n",
	} {
		f.Add([]byte(s), []byte{3, 1, 7})
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		whole, e1 := readAll(bytes.NewReader(data), 1<<20)
		cut, e2 := readAll(&chunkReader{data: data, sizes: sizes}, 1<<20)
		sameResult(t, "whole against cut", whole, cut, e1, e2)
	})
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		ok   bool
	}{
		{`SET k v`, []string{"SET", "k", "v"}, true},
		{"  a\t b  ", []string{"a", "b"}, true},
		{`"a b" 'c d'`, []string{"a b", "c d"}, true},
		{`"\x41\n\r\t\b\a\\\"z"`, []string{"A\n\r\t\b\a\\\"z"}, true},
		{`'it\'s' '\n'`, []string{"it's", `\n`}, true},
		{`""`, []string{""}, true},
		{`a"b"`, []string{"ab"}, true}, // a quote opens inside a word, as in sdssplitargs
		{`"a"b`, nil, false},
		{`"open`, nil, false},
		{`'open`, nil, false},
		{``, nil, true},
	} {
		args, ok := splitArgs([]byte(tc.line))
		var got []string
		for _, a := range args {
			got = append(got, string(a))
		}
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestString2ll(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"12", 12, true}, {"-3", -3, true}, {"", 0, false}, {"01", 0, false}, {"+1", 0, false},
		{"-0", 0, false}, {"1 ", 0, false}, {"9223372036854775807", 1<<63 - 1, true}, {"9223372036854775808", 0, false},
		{"-9223372036854775808", -1 << 63, true},
	} {
		n, ok := string2ll([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("string2ll(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

// TestReaderBudget: a command that cannot fit the budget is refused once
// its size is known, before its bytes are read.
func TestReaderBudget(t *testing.T) {
	_, err := readAll(bytes.NewReader([]byte("*1\r\n$100000\r\n")), 64<<10)
	if !errors.Is(err, errOverBudget) {
		t.Errorf("a 100 kB argument with 64 KiB of budget: %v", err)
	}
	cmds, err := readAll(bytes.NewReader(append([]byte("*1\r\n$40000\r\n"), append(bytes.Repeat([]byte("x"), 40000), "\r\n"...)...)), 64<<10)
	if len(cmds) != 1 || !errors.Is(err, io.EOF) {
		t.Errorf("a 40 kB argument with 64 KiB of budget: %d commands, %v", len(cmds), err)
	}
}
