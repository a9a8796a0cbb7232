package proxy

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
)

// The limits Redis (7.0, networking.c) applies to what a client sends,
// checked here before anything is buffered for it.
const (
	protoInlineMax  = 64 << 10  // PROTO_INLINE_MAX_SIZE: an inline command, or a count line, without its newline
	protoMaxBulkLen = 512 << 20 // proto-max-bulk-len's default: one argument
	protoMaxMbulk   = 1<<31 - 1 // INT_MAX: arguments of one command
	readChunk       = 16 << 10  // what a read asks for at least; a reader's buffer when idle
)

// command is one command read from a client: its RESP form, as sent (an
// inline command's is made from its arguments), and its arguments, which
// point into Raw. Both stay valid until the next ReadCommands.
type command struct {
	Raw  []byte
	Args [][]byte
}

// protoError is a protocol error: the client gets "-ERR Protocol error:
// <msg>", Redis' own words, and its connection is closed.
type protoError struct{ msg string }

func (e *protoError) Error() string { return "Protocol error: " + e.msg }

// reply is what Redis answers the error with.
func (e *protoError) reply() []byte { return []byte("-ERR Protocol error: " + e.msg + "\r\n") }

// errOverBudget: a command would take the client's buffer past its bound
// (Config.MaxClientBuffer) or the proxy's past its own (Config.MaxBuffer).
var errOverBudget = errors.New("over the buffer budget")

// overBudgetReply answers the command that met errOverBudget; the
// connection is then closed (as Redis closes a client past its query
// buffer limit).
var overBudgetReply = []byte("-ERR hotspot-proxy: command too large for the proxy's buffer limit\r\n")

// memBudget bounds the bytes all clients' commands take in the proxy: the
// readers' buffers and what queued commands keep until their replies.
type memBudget struct {
	max     int64
	used    atomic.Int64
	refused atomic.Uint64 // connections closed at a bound
}

// take reserves n bytes; false if that would pass the bound.
func (b *memBudget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *memBudget) give(n int64) { b.used.Add(-n) }

// reqReader reads a client's commands as Redis parses them
// (processInlineBuffer, processMultibulkBuffer), refusing at once what
// Redis refuses, with Redis' errors, and growing its buffer only for a
// command whose size it knows to be within budget. Commands before an
// error in the same read are returned first, as Redis runs them.
type reqReader struct {
	r          io.Reader
	buf        []byte
	start, end int
	err        error // met after the commands returned last: the next call returns it
	cmds       []command
	mb         mbState // the pending multibulk command
	// grow asks for n bytes more of buffer for the client; false refuses
	// (errOverBudget).
	grow func(n int) bool
	// shrink gives n bytes back.
	shrink func(n int)
}

// newReqReader returns a reader of r; grow and shrink account its buffer
// (the first readChunk bytes too, asked for at the first read).
func newReqReader(r io.Reader, grow func(int) bool, shrink func(int)) *reqReader {
	return &reqReader{r: r, grow: grow, shrink: shrink}
}

// close gives the buffer back.
func (rd *reqReader) close() {
	if n := cap(rd.buf); n > 0 {
		rd.shrink(n)
		rd.buf = nil
	}
}

// ReadCommands returns the next commands, at least one, or an error: a
// *protoError, errOverBudget, or the connection's.
func (rd *reqReader) ReadCommands() ([]command, error) {
	for {
		if rd.err != nil {
			return nil, rd.err
		}
		if rd.start == rd.end && cap(rd.buf) > readChunk { // idle: back to one chunk
			rd.shrink(cap(rd.buf) - readChunk)
			rd.buf = make([]byte, readChunk)
			rd.start, rd.end = 0, 0
		}
		cmds, need, err := rd.parse()
		if err != nil {
			rd.err = err
		}
		if len(cmds) > 0 {
			return cmds, nil
		}
		if err != nil {
			return nil, err
		}
		if err := rd.fill(need); err != nil {
			rd.err = err
			return nil, err
		}
	}
}

// fill reads more, with room for at least need bytes of the pending
// command in all (0: unknown yet).
func (rd *reqReader) fill(need int) error {
	pending := rd.end - rd.start
	want := max(need, pending+readChunk)
	if cap(rd.buf) == 0 {
		if !rd.grow(readChunk) {
			return errOverBudget
		}
		rd.buf = make([]byte, readChunk)
	}
	if want > cap(rd.buf) {
		size := max(want, min(2*cap(rd.buf), want+(want>>2)))
		if !rd.grow(size - cap(rd.buf)) {
			size = want
			if !rd.grow(size - cap(rd.buf)) {
				return errOverBudget
			}
		}
		nb := make([]byte, size)
		copy(nb, rd.buf[rd.start:rd.end])
		rd.buf, rd.start, rd.end = nb, 0, pending
	} else if len(rd.buf)-rd.start < want {
		copy(rd.buf, rd.buf[rd.start:rd.end])
		rd.start, rd.end = 0, pending
	}
	n, err := rd.r.Read(rd.buf[rd.end:])
	rd.end += n
	if n > 0 {
		return nil
	}
	return err
}

// parse parses the complete commands in the buffer; need is, when none is
// complete, the size of the pending one as far as it is known.
func (rd *reqReader) parse() (cmds []command, need int, err error) {
	rd.cmds = rd.cmds[:0]
	for rd.start < rd.end {
		b := rd.buf[rd.start:rd.end]
		var cmd command
		var n int
		if b[0] == '*' {
			cmd, n, need, err = parseMultibulk(b, &rd.mb)
		} else {
			cmd, n, err = parseInline(b)
		}
		if err != nil || n == 0 {
			break
		}
		rd.start += n
		if len(cmd.Args) > 0 {
			rd.cmds = append(rd.cmds, cmd)
		}
	}
	if rd.start == rd.end {
		rd.start, rd.end = 0, 0
	}
	return rd.cmds, need, err
}

// mbState is how far the parse of a multibulk command that is not all
// there got, so that the next read goes on from there instead of parsing
// it again (a command of a million small arguments arriving in pieces).
type mbState struct {
	left  int64 // arguments still to parse; 0: no command pending
	pos   int   // where the next one starts, from the command's start
	marks []int // the arguments parsed: start and end, from the command's start
}

// parseMultibulk parses one *N command at the start of b, going on from st:
// n is its length in b, 0 if it is not all there, and need then the bytes
// it takes as far as known.
func parseMultibulk(b []byte, st *mbState) (cmd command, n, need int, err error) {
	if st.left == 0 {
		i := bytes.IndexByte(b, '\r')
		if i < 0 {
			if len(b) > protoInlineMax {
				return cmd, 0, 0, &protoError{"too big mbulk count string"}
			}
			return cmd, 0, 0, nil
		}
		if i > len(b)-2 { // the '\n' too
			return cmd, 0, 0, nil
		}
		count, ok := string2ll(b[1:i])
		if !ok || count > protoMaxMbulk {
			return cmd, 0, 0, &protoError{"invalid multibulk length"}
		}
		if count <= 0 {
			return cmd, i + 2, 0, nil
		}
		st.left, st.pos, st.marks = count, i+2, st.marks[:0]
	}
	for st.left > 0 {
		pos := st.pos
		j := bytes.IndexByte(b[pos:], '\r')
		if j < 0 {
			if len(b)-pos > protoInlineMax {
				return cmd, 0, 0, &protoError{"too big bulk count string"}
			}
			return cmd, 0, 0, nil
		}
		if j > len(b)-pos-2 {
			return cmd, 0, 0, nil
		}
		if b[pos] != '$' {
			return cmd, 0, 0, &protoError{"expected '$', got '" + string(b[pos]) + "'"}
		}
		size, ok := string2ll(b[pos+1 : pos+j])
		if !ok || size < 0 || size > protoMaxBulkLen {
			return cmd, 0, 0, &protoError{"invalid bulk length"}
		}
		pos += j + 2
		if len(b)-pos < int(size)+2 {
			return cmd, 0, pos + int(size) + 2, nil
		}
		st.marks = append(st.marks, pos, pos+int(size))
		st.pos = pos + int(size) + 2 // Redis skips the two bytes after an argument unchecked
		st.left--
	}
	cmd.Raw = b[:st.pos]
	cmd.Args = make([][]byte, len(st.marks)/2)
	for k := range cmd.Args {
		cmd.Args[k] = b[st.marks[2*k]:st.marks[2*k+1]:st.marks[2*k+1]]
	}
	return cmd, st.pos, 0, nil
}

// parseInline parses one inline command (a line of words) at the start of
// b: n is its length in b, 0 if the line is not all there. Its Raw is its
// RESP form, which Redis parses to the same arguments.
func parseInline(b []byte) (cmd command, n int, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > protoInlineMax {
			return cmd, 0, &protoError{"too big inline request"}
		}
		return cmd, 0, nil
	}
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if k := bytes.IndexByte(line, 0); k >= 0 { // sdssplitargs stops at a NUL
		line = line[:k]
	}
	args, ok := splitArgs(line)
	if !ok {
		return cmd, 0, &protoError{"unbalanced quotes in request"}
	}
	if len(args) == 0 {
		return cmd, i + 1, nil
	}
	raw := appendCommand(nil, args)
	cmd.Raw = raw
	cmd.Args = make([][]byte, len(args))
	pos := 0
	// The arguments again, pointing into raw.
	for k, a := range args {
		pos = bytes.IndexByte(raw[pos:], '\n') + pos + 1 // past *N or the previous argument
		pos = bytes.IndexByte(raw[pos:], '\n') + pos + 1 // past $len
		cmd.Args[k] = raw[pos : pos+len(a) : pos+len(a)]
		pos += len(a)
	}
	return cmd, i + 1, nil
}

// appendCommand appends args as a RESP command.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// string2ll parses a count as Redis' string2ll does: an optional '-', no
// '+', no leading zero, no space, within int64.
func string2ll(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<64-1)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case !neg && v > 1<<63-1, neg && v > 1<<63:
		return 0, false
	case neg:
		return -int64(v), true
	}
	return int64(v), true
}

// splitArgs splits an inline command's line into words as Redis'
// sdssplitargs does: spaces separate them; "double quotes" take \n, \r, \t,
// \b, \a, \\, \" and \xHH escapes, 'single quotes' \'; a closing quote must
// be followed by a space or the end. ok is false for unbalanced quotes.
func splitArgs(line []byte) (args [][]byte, ok bool) {
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			switch {
			case inq:
				if p >= len(line) {
					return nil, false
				}
				c := line[p]
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, hexVal(line[p+2])<<4|hexVal(line[p+3]))
					p += 3
				case c == '\\' && p+1 < len(line):
					p++
					switch line[p] {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, line[p])
					}
				case c == '"':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case insq:
				if p >= len(line) {
					return nil, false
				}
				c := line[p]
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			default:
				if p >= len(line) {
					done = true
					break
				}
				switch c := line[p]; c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
