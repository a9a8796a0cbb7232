package ingest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// format is an input's record format.
type format uint8

const (
	fmtHotspot format = iota
	fmtJSON
	fmtRegex
	fmtCombined
)

var formatNames = [...]string{fmtHotspot: "hotspot", fmtJSON: "json", fmtRegex: "regex", fmtCombined: "combined"}

// plan is an input compiled for decoding.
type plan struct {
	format format
	names  []string // slot → the field's name (group or path)

	re   *regexp.Regexp // regex: the line pattern
	root *jnode         // json: the paths read

	key                          template
	app                          string // the constant app, or the fallback of appSlot
	appSlot, timeSlot            int    // -1: none
	srcSlot                      int    // the source's field; -1: none
	bytesSlot, opSlot, countSlot int    // -1: none
	time                         timeFormat
	opMethod                     bool // combined: the op is the request method's (any method but GET and HEAD writes)
	where                        []whereClause
	extract                      *extractSpec
	badTime                      string // the detail of bad_time
}

// whereClause keeps a line only if its field matches the pattern.
type whereClause struct {
	slot    int
	name    string
	pattern string
	m       matcher
}

// extractSpec matches re against a field; its groups feed the key.
type extractSpec struct {
	slot    int
	name    string
	pattern string
	re      *regexp.Regexp
}

// compiler turns one rawInput into an Input, collecting every problem.
type compiler struct {
	idx    int
	topic  string
	errs   []error
	p      *plan
	raw    *rawInput
	paths  map[string]int // json: path → slot
	ext    *regexp.Regexp // the extract pattern, once compiled
	extBad bool           // the extract pattern is broken (so key may name its groups in vain)
}

func (c *compiler) errorf(field, format string, args ...any) {
	prefix := fmt.Sprintf("input %d", c.idx)
	if c.topic != "" {
		prefix += fmt.Sprintf(" (topic %q)", c.topic)
	}
	if field != "" {
		prefix += ": " + field
	}
	c.errs = append(c.errs, fmt.Errorf(prefix+": "+format, args...))
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (c *compiler) compile(ri *rawInput) Input {
	c.raw = ri
	in := Input{index: c.idx}
	switch {
	case ri.Topic == nil || *ri.Topic == "":
		c.errorf("topic", "missing (every input names its topic)")
	case !validTopic(*ri.Topic):
		c.topic = *ri.Topic
		c.errorf("topic", "not a Kafka topic name (1 to 249 of a-z A-Z 0-9 . _ -)")
	default:
		c.topic = *ri.Topic
		in.Topic = *ri.Topic
	}
	in.Format = "hotspot"
	if ri.Format != nil {
		in.Format = *ri.Format
	}
	f := slices.Index(formatNames[:], in.Format)
	if f < 0 {
		c.errorf("format", "unknown format %q (want hotspot, json, regex or combined)", in.Format)
		return in
	}
	c.p = &plan{format: format(f), appSlot: -1, srcSlot: -1, timeSlot: -1, bytesSlot: -1, opSlot: -1, countSlot: -1, app: wire.DefaultApp}
	if c.p.format == fmtHotspot {
		c.checkHotspot()
		in.p = c.p
		return in
	}
	c.forbid()
	c.lineFields()
	c.mapped()
	c.compileExtract()
	c.compileKey()
	c.compileWhere()
	in.p = c.p
	return in
}

// validTopic reports whether s is a legal Kafka topic name.
func validTopic(s string) bool {
	if len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkHotspot refuses every setting but topic and format.
func (c *compiler) checkHotspot() {
	ri := c.raw
	for _, s := range [...]struct {
		name string
		set  bool
	}{
		{"app", ri.App != nil}, {"app_field", ri.AppField != nil}, {"source_field", ri.SrcField != nil}, {"key", ri.Key != nil},
		{"extract", ri.Extract != nil}, {"where", ri.Where != nil}, {"fields", ri.Fields != nil}, {"time", ri.Time != nil},
		{"pattern", ri.Pattern != nil},
	} {
		if s.set {
			c.errorf(s.name, "not used by format hotspot (its records carry key, app, source, time, bytes, op and count themselves)")
		}
	}
}

// forbid refuses the settings the input's format has no use for.
func (c *compiler) forbid() {
	ri, f := c.raw, c.p.format
	if ri.Pattern != nil && f != fmtRegex {
		c.errorf("pattern", "only for format regex (format %s has its own syntax)", formatNames[f])
	}
	if ri.Fields != nil && f == fmtCombined {
		c.errorf("fields", "not used by format combined: its groups are fixed (key {path} by default, op from method, bytes from bytes, time from time_local with time: clf)")
	}
}

// lineFields sets up the fields a line provides: the groups of combined or
// of the regex pattern. (Those of json are its paths, added as they are
// named.)
func (c *compiler) lineFields() {
	p := c.p
	switch p.format {
	case fmtCombined:
		p.names = combinedGroups[:]
		p.opSlot, p.bytesSlot, p.opMethod = cMethod, cBytes, true
	case fmtRegex:
		pat := str(c.raw.Pattern)
		if pat == "" {
			c.errorf("pattern", "missing (format regex needs an RE2 pattern with named groups)")
			return
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			c.errorf("pattern", "%w", err)
			return
		}
		named := 0
		for _, n := range re.SubexpNames() {
			if n != "" {
				named++
			}
		}
		if named == 0 {
			c.errorf("pattern", "has no named group (?P<name>...) for the key to use")
			return
		}
		p.re = re
		p.names = re.SubexpNames()
	case fmtJSON:
		p.root = newJNode()
		c.paths = make(map[string]int)
	}
}

// field resolves the name of a field of the line for setting what: a group
// of combined or of the regex pattern, or a dotted path of json (where the
// names given in fields stand for their paths). It returns the slot, or -1
// after reporting the problem (or silently, when the pattern is broken).
func (c *compiler) field(what, name string) int {
	return c.fieldAs(what, name, name)
}

// fieldAs is field, naming the field shown in error messages.
func (c *compiler) fieldAs(what, name, shown string) int {
	p := c.p
	switch p.format {
	case fmtCombined:
		if i := slices.Index(combinedGroups[:], name); i >= 0 {
			return i
		}
		c.errorf(what, "%s names no group of format combined (it has %s)", shown, strings.Join(combinedGroups[:], ", "))
	case fmtRegex:
		if p.re == nil {
			return -1
		}
		if i := p.re.SubexpIndex(name); i > 0 {
			return i
		}
		c.errorf(what, "%s names no group of the pattern (it has %s)", shown, strings.Join(namedGroups(p.re), ", "))
	case fmtJSON:
		if path := c.alias(name); path != "" {
			name = path
		}
		segs, err := splitPath(name)
		if err != nil {
			c.errorf(what, "%s: path %q: %s", shown, name, err)
			return -1
		}
		key := strings.Join(segs, "\x00")
		if slot, ok := c.paths[key]; ok {
			return slot
		}
		slot := len(p.names)
		p.names = append(p.names, name)
		c.paths[key] = slot
		p.root.add(segs, slot)
		return slot
	}
	return -1
}

// alias returns the path that a fields entry gives name (json only).
func (c *compiler) alias(name string) string {
	var path string
	if f := c.raw.Fields; f != nil {
		f.each(func(role, p string) {
			if role == name {
				path = p
			}
		})
	}
	return path
}

func namedGroups(re *regexp.Regexp) []string {
	var ns []string
	for _, n := range re.SubexpNames() {
		if n != "" {
			ns = append(ns, n)
		}
	}
	return ns
}

// splitPath splits a dotted path into its member names: "." separates them,
// and a backslash makes the character after it literal ("a\.b" is the one
// member "a.b"). A member name of digits also indexes an array.
func splitPath(s string) ([]string, error) {
	var segs []string
	var seg []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return nil, errors.New(`ends with "\"`)
			}
			i++
			seg = append(seg, s[i])
		case '.':
			if len(seg) == 0 {
				return nil, errors.New("empty member name")
			}
			segs = append(segs, string(seg))
			seg = seg[:0]
		default:
			seg = append(seg, s[i])
		}
	}
	if len(seg) == 0 {
		return nil, errors.New("empty member name")
	}
	if !utf8.Valid(seg) {
		return nil, errors.New("not valid UTF-8")
	}
	return append(segs, string(seg)), nil
}

// mapped compiles app, app_field, source_field, time and the fields
// entries.
func (c *compiler) mapped() {
	ri, p := c.raw, c.p
	if ri.App != nil {
		switch app := *ri.App; {
		case app == "":
			c.errorf("app", "empty (leave it out for the app %q)", wire.DefaultApp)
		case len(app) > wire.DefaultMaxKeyLen:
			c.errorf("app", "longer than %d bytes", wire.DefaultMaxKeyLen)
		case !utf8.ValidString(app):
			c.errorf("app", "not valid UTF-8")
		default:
			p.app = app
		}
	}
	f := ri.Fields
	if f == nil {
		f = &rawFields{}
	}
	if ri.AppField != nil {
		switch {
		case *ri.AppField == "":
			c.errorf("app_field", "empty")
		case f.App != "":
			c.errorf("app_field", "given along with fields.app (they are one setting: keep one)")
		default:
			p.appSlot = c.field("app_field", *ri.AppField)
		}
	}
	if ri.SrcField != nil {
		switch {
		case *ri.SrcField == "":
			c.errorf("source_field", "empty")
		case f.Source != "":
			c.errorf("source_field", "given along with fields.source (they are one setting: keep one)")
		default:
			p.srcSlot = c.field("source_field", *ri.SrcField)
		}
	}
	if ri.Fields != nil {
		for _, e := range [...]struct {
			role string
			name string
			slot *int
		}{
			{"key", f.Key, nil}, {"app", f.App, &p.appSlot}, {"time", f.Time, &p.timeSlot},
			{"bytes", f.Bytes, &p.bytesSlot}, {"op", f.Op, &p.opSlot}, {"count", f.Count, &p.countSlot},
			{"source", f.Source, &p.srcSlot},
		} {
			if e.name == "" {
				continue
			}
			slot := c.field("fields."+e.role, e.name)
			if e.slot != nil {
				*e.slot = slot
			}
		}
	}
	if ri.Time != nil {
		tf, ok := parseTimeFormat(*ri.Time)
		switch {
		case !ok:
			c.errorf("time", "unknown time format %q (want unix_s, unix_ms, rfc3339 or clf; leave it out to use the Kafka record's timestamp)", *ri.Time)
		case p.format == fmtCombined && tf != timeCLF:
			c.errorf("time", "format combined has only clf (its time_local)")
		case p.format == fmtCombined:
			p.time, p.timeSlot = tf, cTimeLocal
		case f.Time == "":
			c.errorf("time", "needs fields.time, the field that holds the time")
		default:
			p.time = tf
		}
		p.badTime = "the time is not " + timeFormatNames[tf] + " (or not after 1970):"
	} else if f.Time != "" {
		c.errorf("fields.time", "needs time, the time format (unix_s, unix_ms, rfc3339 or clf)")
	}
}

// compileExtract compiles the extract pattern.
func (c *compiler) compileExtract() {
	x, p := c.raw.Extract, c.p
	if x == nil {
		return
	}
	if x.Pattern == "" {
		c.errorf("extract.pattern", "missing")
	}
	if x.Field == "" {
		c.errorf("extract.field", "missing")
	}
	if x.Pattern == "" || x.Field == "" {
		return
	}
	slot := c.field("extract.field", x.Field)
	re, err := regexp.Compile(x.Pattern)
	if err != nil {
		c.errorf("extract.pattern", "%w", err)
		c.extBad = true
		return
	}
	groups := namedGroups(re)
	if len(groups) == 0 {
		c.errorf("extract.pattern", "has no named group (?P<name>...) for the key to use")
		return
	}
	for _, g := range groups {
		if c.shadows(g) {
			c.errorf("extract.pattern", "group %s has the name of a field of the line; rename it", g)
		}
	}
	c.ext = re
	if slot >= 0 {
		p.extract = &extractSpec{slot: slot, name: x.Field, pattern: x.Pattern, re: re}
	}
}

// shadows reports whether an extract group named g would hide a field of
// the line of the same name.
func (c *compiler) shadows(g string) bool {
	switch c.p.format {
	case fmtCombined:
		return slices.Contains(combinedGroups[:], g)
	case fmtRegex:
		return c.p.re != nil && c.p.re.SubexpIndex(g) > 0
	}
	return c.alias(g) != ""
}

// compileKey compiles the key template: key, or else the field
// fields.key, or else format combined's {path}.
func (c *compiler) compileKey() {
	ri, p := c.raw, c.p
	src := str(ri.Key)
	derived := false // from fields.key, which mapped checked already
	switch {
	case ri.Key != nil && src == "":
		c.errorf("key", "empty template")
		return
	case ri.Key != nil:
	case p.format == fmtCombined:
		src = "{path}"
	case ri.Fields != nil && ri.Fields.Key != "":
		src, derived = "{"+ri.Fields.Key+"}", true // a group name: letters, digits, _
		if p.format == fmtJSON {
			src = "{key}" // the alias of the path
		}
	default:
		c.errorf("key", "missing (give a key template, or fields.key)")
		return
	}
	parts, err := parseTemplate(src)
	if err != nil {
		c.errorf("key", "%s", err)
		return
	}
	p.key.src = src
	if derived && p.format == fmtJSON {
		p.key.src = "{" + ri.Fields.Key + "}" // for Explain: the path itself
	}
	usedExt := false
	for _, t := range parts {
		if !t.ref {
			p.key.parts = append(p.key.parts, ref{kind: refLit, lit: t.lit})
			continue
		}
		if c.ext != nil {
			if g := c.ext.SubexpIndex(t.name); g > 0 {
				p.key.parts = append(p.key.parts, ref{kind: refGroup, idx: g, name: t.name})
				usedExt = true
				continue
			}
		}
		nerr := len(c.errs)
		if slot := c.fieldAs("key", t.name, "{"+t.name+"}"); slot >= 0 {
			p.key.parts = append(p.key.parts, ref{kind: refSlot, idx: slot, name: t.name})
		} else if derived || c.extBad {
			c.errs = c.errs[:nerr] // said already
		}
	}
	if c.ext != nil && !usedExt {
		c.errorf("extract", "none of its groups (%s) is used by key %q", strings.Join(namedGroups(c.ext), ", "), src)
	}
}

// compileWhere compiles the where clauses, in name order.
func (c *compiler) compileWhere() {
	names := make([]string, 0, len(c.raw.Where))
	for n := range c.raw.Where {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		pat := c.raw.Where[n]
		slot := c.field("where."+n, n)
		re, err := regexp.Compile(pat)
		if err != nil {
			c.errorf("where."+n, "%w", err)
			continue
		}
		if slot >= 0 {
			c.p.where = append(c.p.where, whereClause{slot: slot, name: n, pattern: pat, m: newMatcher(re)})
		}
	}
}
