package ingest

import "bytes"

// The groups of format combined, in the order they appear in a line.
const (
	cRemoteAddr = iota
	cRemoteUser
	cTimeLocal
	cMethod
	cPath
	cQuery
	cProtocol
	cStatus
	cBytes
	cReferer
	cUserAgent
	numCombined
)

// combinedGroups are the names of the groups of format combined.
var combinedGroups = [numCombined]string{
	cRemoteAddr: "remote_addr",
	cRemoteUser: "remote_user",
	cTimeLocal:  "time_local",
	cMethod:     "method",
	cPath:       "path",
	cQuery:      "query",
	cProtocol:   "protocol",
	cStatus:     "status",
	cBytes:      "bytes",
	cReferer:    "referer",
	cUserAgent:  "user_agent",
}

// combinedRE is the definition of format combined (nginx's and Apache's
// "combined" log format) as an RE2 pattern, matched against a line trimmed
// of spaces, tabs and CRs. parseCombined implements it by hand, because Go's
// regexp takes microseconds per line; FuzzCombined checks that the two agree
// on every input, groups included. In the quoted fields a backslash escapes
// the byte after it (Apache writes \" and \\; nginx writes \xHH), and the
// request's ident field (the "-" after remote_addr) is any non-space text.
const combinedRE = `(?s)^(?P<remote_addr>\S+) \S+ (?P<remote_user>\S+) \[(?P<time_local>[^\]]*)\] ` +
	`"(?P<method>(?:[^ "\\]|\\.)+) (?P<path>(?:[^ "?\\]|\\.)*)(?:\?(?P<query>(?:[^ "\\]|\\.)*))? (?P<protocol>(?:[^ "\\]|\\.)+)" ` +
	`(?P<status>[0-9]{3}) (?P<bytes>[0-9]+|-) "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<user_agent>(?:[^"\\]|\\.)*)"$`

// combinedSpans holds, for each group g, its span b[s[2g]:s[2g+1]]; both
// are -1 for a group that did not take part (only query, when the request
// has no '?'), as in regexp's FindSubmatchIndex.
type combinedSpans [2 * numCombined]int

// isSpaceRE reports whether c is in RE2's \s: tab, LF, FF, CR or space.
func isSpaceRE(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// set records group grp's span b[i:j].
func (g *combinedSpans) set(grp, i, j int) { g[2*grp], g[2*grp+1] = i, j }

// parseCombined matches b against combinedRE, filling g. It returns -1 on
// a match, otherwise the offset where b stops matching and what was
// expected there (for Explain). Each part of the line is parsed by a
// function of its own that takes the offset where the part starts and
// returns the offset after it, or the offset where it stops matching and
// what it expected there.
func parseCombined(b []byte, g *combinedSpans) (int, string) {
	i, what := combinedClient(b, g)
	if what != "" {
		return i, what
	}
	if i, what = combinedTime(b, i, g); what != "" {
		return i, what
	}
	if i, what = combinedRequest(b, i, g); what != "" {
		return i, what
	}
	if i, what = combinedStatus(b, i, g); what != "" {
		return i, what
	}
	if i, what = combinedAgent(b, i, g); what != "" {
		return i, what
	}
	if i != len(b) {
		return i, "the end of the line after user_agent"
	}
	return -1, ""
}

// combinedClient parses who sent the request, at the start of b:
// remote_addr, ident and remote_user, \S+ each, each followed by a space.
func combinedClient(b []byte, g *combinedSpans) (int, string) {
	i := 0
	for f, what := range [3]string{"remote_addr", "the ident field", "remote_user"} {
		j := i
		for j < len(b) && !isSpaceRE(b[j]) {
			j++
		}
		if j == i {
			return i, what
		}
		switch f {
		case 0:
			g.set(cRemoteAddr, i, j)
		case 2:
			g.set(cRemoteUser, i, j)
		}
		if j >= len(b) || b[j] != ' ' {
			return j, "a space"
		}
		i = j + 1
	}
	return i, ""
}

// combinedTime parses "[time_local]" at b[i].
func combinedTime(b []byte, i int, g *combinedSpans) (int, string) {
	if i >= len(b) || b[i] != '[' {
		return i, `"[" before time_local`
	}
	i++
	j := bytes.IndexByte(b[i:], ']')
	if j < 0 {
		return len(b), `"]" after time_local`
	}
	g.set(cTimeLocal, i, i+j)
	return i + j + 1, ""
}

// combinedRequest parses the quoted request at b[i], with the space before
// it and after it: ' "method path[?query] protocol" '.
func combinedRequest(b []byte, i int, g *combinedSpans) (int, string) {
	if !hasPrefixAt(b, i, ` "`) {
		return i, `' "' before the request`
	}
	i += 2
	j := reqToken(b, i, false)
	if j == i {
		return i, "the request method"
	}
	g.set(cMethod, i, j)
	if j >= len(b) || b[j] != ' ' {
		return j, "a space after the method"
	}
	i = j + 1
	j = reqToken(b, i, true)
	g.set(cPath, i, j)
	g.set(cQuery, -1, -1)
	if j < len(b) && b[j] == '?' {
		i = j + 1
		j = reqToken(b, i, false)
		g.set(cQuery, i, j)
	}
	if j >= len(b) || b[j] != ' ' {
		return j, "a space after the request target"
	}
	i = j + 1
	j = reqToken(b, i, false)
	if j == i {
		return i, "the request protocol"
	}
	g.set(cProtocol, i, j)
	if !hasPrefixAt(b, j, `" `) {
		return j, `'" ' after the request`
	}
	return j + 2, ""
}

// combinedStatus parses the response at b[i]: status, three digits, a
// space, and bytes (body_bytes_sent), digits or "-".
func combinedStatus(b []byte, i int, g *combinedSpans) (int, string) {
	if i+3 > len(b) || !isDigit(b[i]) || !isDigit(b[i+1]) || !isDigit(b[i+2]) {
		return i, "a three-digit status"
	}
	g.set(cStatus, i, i+3)
	i += 3
	if i >= len(b) || b[i] != ' ' {
		return i, "a space after the status"
	}
	i++
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	} else {
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	}
	if j == i {
		return i, `body_bytes_sent (digits or "-")`
	}
	g.set(cBytes, i, j)
	return j, ""
}

// combinedAgent parses the quoted referer and user_agent at b[i], each
// after a space.
func combinedAgent(b []byte, i int, g *combinedSpans) (int, string) {
	for k, grp := range [2]int{cReferer, cUserAgent} {
		if !hasPrefixAt(b, i, ` "`) {
			return i, [2]string{`' "' before referer`, `' "' before user_agent`}[k]
		}
		i += 2
		j := quoted(b, i)
		if j >= len(b) || b[j] != '"' {
			return j, [2]string{`'"' after referer`, `'"' after user_agent`}[k]
		}
		g.set(grp, i, j)
		i = j + 1
	}
	return i, ""
}

// reqStop[c] and reqStopQ[c] report whether byte c ends (or, for '\\',
// interrupts) a request token: ' ', '"', '\\', and for reqStopQ also '?'.
var reqStop, reqStopQ = func() (t, q [256]bool) {
	for _, c := range []byte{' ', '"', '\\'} {
		t[c], q[c] = true, true
	}
	q['?'] = true
	return t, q
}()

// reqToken returns the end of the request token at b[i]: the first ' ' or
// '"' (or '?', when stopQ) that is not escaped by a backslash, or the
// backslash that ends b.
func reqToken(b []byte, i int, stopQ bool) int {
	stop := &reqStop
	if stopQ {
		stop = &reqStopQ
	}
	for {
		for i < len(b) && !stop[b[i]] {
			i++
		}
		if i >= len(b) || b[i] != '\\' || i+1 == len(b) {
			return i
		}
		i += 2
	}
}

// quoted returns the end of the quoted field's text at b[i]: the first '"'
// not escaped by a backslash, or len(b), or the backslash that ends b.
func quoted(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			j = len(b) - i
		}
		// A backslash-free run is the common case: no escapes to honour.
		k := bytes.IndexByte(b[i:i+j], '\\')
		if k < 0 {
			return i + j
		}
		i += k
		if i+1 == len(b) {
			return i
		}
		i += 2
	}
}

// hasPrefixAt reports whether b[i:] starts with p.
func hasPrefixAt(b []byte, i int, p string) bool {
	return i <= len(b) && len(b)-i >= len(p) && string(b[i:i+len(p)]) == p
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// methodIsRead reports whether an HTTP method reads: GET and HEAD, in any
// case. Format combined counts every other method as a write.
func methodIsRead(m []byte) bool {
	return asciiEqualFold(m, "get") || asciiEqualFold(m, "head")
}

// asciiEqualFold reports whether b equals the lower-case ASCII word w,
// ignoring ASCII case.
func asciiEqualFold(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i := range len(b) {
		if b[i]|0x20 != w[i] {
			return false
		}
	}
	return true
}
