package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Explain says, as human-readable text, how the input reads and what line
// becomes: the fields the line provides, each where clause and the extract
// pattern at work, then the access (key, app, source if any, op, bytes,
// count, time) or why the line is dropped (the reason, the metric label,
// and a detail), and a source left out and why. It is for `hotspotd
// --check-input FILE --sample LINE`. A line holding '\n' is explained line
// by line; the key, app and source limit is wire.DefaultMaxKeyLen.
func (in *Input) Explain(line []byte) string {
	var sb strings.Builder
	topic, fmtName, idx := "", "hotspot", 0
	if in != nil {
		topic, idx = in.Topic, in.index
		if in.Format != "" {
			fmtName = in.Format
		}
	}
	fmt.Fprintf(&sb, "input %d: topic %q, format %s\n", idx, topic, fmtName)
	d := in.NewDecoder(0, nil)
	if d.p == nil || d.p.format == fmtHotspot {
		explainHotspot(&sb, d, line)
		return sb.String()
	}
	d.p.describe(&sb)
	n := 0
	for l := range bytes.SplitSeq(line, []byte{'\n'}) {
		if l = bytes.Trim(l, " \t\r"); len(l) == 0 {
			continue
		}
		n++
		fmt.Fprintf(&sb, "line %q\n", l)
		d.explainLine(&sb, l)
	}
	if n == 0 {
		sb.WriteString("blank: skipped (a record of blank lines only is dropped as empty)\n")
	}
	return sb.String()
}

func explainHotspot(sb *strings.Builder, d *Decoder, line []byte) {
	sb.WriteString("  records: JSON access events, one per line, or the SDK's binary batch (docs/wire.md)\n")
	err := d.Decode(line, func(e *wire.Entry) {
		writeAccess(sb, e, "the Kafka record's timestamp")
	})
	var ie *Error
	if errors.As(err, &ie) {
		fmt.Fprintf(sb, "  dropped: %s: %s\n", ie.Reason, ie.Detail)
	}
}

// describe writes how p turns a line into an access.
func (p *plan) describe(sb *strings.Builder) {
	switch p.format {
	case fmtCombined:
		fmt.Fprintf(sb, "  lines: nginx/Apache combined; groups %s\n", strings.Join(combinedGroups[:], ", "))
	case fmtRegex:
		fmt.Fprintf(sb, "  lines: match %q; groups %s\n", p.re.String(), strings.Join(namedGroups(p.re), ", "))
	case fmtJSON:
		sb.WriteString("  lines: JSON objects; paths read:")
		for _, n := range p.names {
			sb.WriteString(" " + n)
		}
		sb.WriteString("\n")
	}
	for _, w := range p.where {
		fmt.Fprintf(sb, "  where %s matches %q\n", w.name, w.pattern)
	}
	if x := p.extract; x != nil {
		fmt.Fprintf(sb, "  extract from %s with %q\n", x.name, x.pattern)
	}
	fmt.Fprintf(sb, "  key %q\n", p.key.src)
	if p.appSlot >= 0 {
		fmt.Fprintf(sb, "  app from %s, else %q\n", p.names[p.appSlot], p.app)
	} else {
		fmt.Fprintf(sb, "  app %q\n", p.app)
	}
	if p.srcSlot >= 0 {
		fmt.Fprintf(sb, "  source from %s, else none\n", p.names[p.srcSlot])
	}
	switch {
	case p.opMethod:
		sb.WriteString("  op from method (GET and HEAD read, other methods write)\n")
	case p.opSlot >= 0:
		fmt.Fprintf(sb, "  op from %s, else read\n", p.names[p.opSlot])
	}
	if p.bytesSlot >= 0 {
		fmt.Fprintf(sb, "  bytes from %s\n", p.names[p.bytesSlot])
	}
	if p.countSlot >= 0 {
		fmt.Fprintf(sb, "  count from %s, else 1\n", p.names[p.countSlot])
	}
	if p.timeSlot >= 0 {
		fmt.Fprintf(sb, "  time from %s as %s\n", p.names[p.timeSlot], timeFormatNames[p.time])
	} else {
		sb.WriteString("  time: the Kafka record's timestamp\n")
	}
}

// explainLine explains one trimmed, non-blank line.
func (d *Decoder) explainLine(sb *strings.Builder, b []byte) {
	p := d.p
	if dr := d.fields(b); dr.r != 0 {
		writeDrop(sb, dr)
		return
	}
	sb.WriteString("  fields:\n")
	for slot, name := range p.names {
		if name == "" || p.format == fmtRegex && slot == 0 {
			continue
		}
		fmt.Fprintf(sb, "    %s = %s\n", name, showVal(d.vals[slot]))
	}
	for _, w := range p.where {
		v := d.vals[w.slot]
		verdict := "does not match"
		if v.k < kObject && w.m.match(v.b) {
			verdict = "matches"
		}
		fmt.Fprintf(sb, "  where %s: %s %s %q\n", w.name, showVal(v), verdict, w.pattern)
	}
	dr := d.finish()
	if x := p.extract; x != nil && d.ext != nil {
		fmt.Fprintf(sb, "  extract from %s:", x.name)
		for g, name := range x.re.SubexpNames() {
			if name != "" && d.ext[2*g] >= 0 {
				fmt.Fprintf(sb, " %s=%q", name, d.extSrc[d.ext[2*g]:d.ext[2*g+1]])
			}
		}
		sb.WriteString("\n")
	}
	if dr.r != 0 {
		writeDrop(sb, dr)
		return
	}
	if _, why := d.source(); why != "" {
		fmt.Fprintf(sb, "  source left out (the access is kept): %s: %s\n", p.names[p.srcSlot], why)
	}
	writeAccess(sb, &d.entry, "none in the line: the Kafka record's timestamp")
}

func writeDrop(sb *strings.Builder, dr drop) {
	fmt.Fprintf(sb, "  dropped: %s: %s", dr.r, dr.detail())
	if dr.r == ReasonUnmatched && dr.off > 0 || dr.r == ReasonNotJSON {
		fmt.Fprintf(sb, " (at byte %d)", dr.off)
	}
	sb.WriteString("\n")
}

func writeAccess(sb *strings.Builder, e *wire.Entry, noTime string) {
	fmt.Fprintf(sb, "  access: key %q, app %q, ", e.Key, e.App)
	if len(e.Src) > 0 {
		fmt.Fprintf(sb, "source %q, ", e.Src)
	}
	fmt.Fprintf(sb, "op %s, bytes %d, count %d, time ", e.Op, e.Bytes, e.Count)
	if e.TS == 0 {
		sb.WriteString(noTime + "\n")
		return
	}
	fmt.Fprintf(sb, "%d (%s)\n", e.TS, time.UnixMilli(e.TS).UTC().Format(time.RFC3339Nano))
}

func showVal(v val) string {
	switch v.k {
	case kAbsent:
		return "(absent)"
	case kString:
		return strconv.Quote(string(v.b))
	}
	return kindNames[v.k] + " " + string(v.b)
}
