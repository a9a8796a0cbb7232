package ingest

import (
	"math"
	"strconv"
	"unsafe"
)

// timeFormat is how an input's time field is written.
type timeFormat uint8

const (
	timeNone    timeFormat = iota // no time field: TS 0, the record's Kafka timestamp
	timeUnixS                     // "unix_s": seconds since the epoch, fraction allowed
	timeUnixMs                    // "unix_ms": milliseconds since the epoch, fraction allowed
	timeRFC3339                   // "rfc3339": 2006-01-02T15:04:05.999Z07:00
	timeCLF                       // "clf": 10/Oct/2000:13:55:36 -0700
)

var timeFormatNames = [...]string{
	timeNone:    "",
	timeUnixS:   "unix_s",
	timeUnixMs:  "unix_ms",
	timeRFC3339: "rfc3339",
	timeCLF:     "clf",
}

func parseTimeFormat(s string) (timeFormat, bool) {
	for f, n := range timeFormatNames {
		if f > 0 && n == s {
			return timeFormat(f), true
		}
	}
	return timeNone, false
}

// parseTime returns the time b stands for in format f, in Unix
// milliseconds; ok is false when b does not parse or the time is not after
// the epoch (TS 0 means "not given", and no access log predates 1970).
// Fractions of a millisecond are truncated. It does not allocate.
func parseTime(b []byte, f timeFormat) (ms int64, ok bool) {
	switch f {
	case timeUnixS:
		ms, ok = parseUnix(b, 1000)
	case timeUnixMs:
		ms, ok = parseUnix(b, 1)
	case timeRFC3339:
		ms, ok = parseRFC3339(b)
	case timeCLF:
		ms, ok = parseCLF(b)
	}
	return ms, ok && ms > 0
}

// parseUnix parses a non-negative decimal number of units of scale
// milliseconds: digits, an optional fraction, an optional exponent (a JSON
// number or the same text in a string).
func parseUnix(b []byte, scale int64) (int64, bool) {
	i := 0
	var v int64
	for i < len(b) && isDigit(b[i]) {
		if v > (math.MaxInt64-9)/10 {
			return 0, false
		}
		v = v*10 + int64(b[i]-'0')
		i++
	}
	if i == 0 {
		return 0, false
	}
	if v > (math.MaxInt64-1000)/scale { // room for a fraction
		return 0, false
	}
	ms := v * scale
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for unit := scale; i < len(b) && isDigit(b[i]); i++ {
			unit /= 10
			ms += int64(b[i]-'0') * unit // unit reaches 0 past millisecond digits
		}
		if i == start {
			return 0, false
		}
	}
	if i == len(b) {
		return ms, true
	}
	if b[i] != 'e' && b[i] != 'E' {
		return 0, false
	}
	// An exponent: rare enough to hand to strconv (b is a valid number
	// syntax up to here; ParseFloat checks the rest).
	j := i + 1
	if j < len(b) && (b[j] == '+' || b[j] == '-') {
		j++
	}
	if j == len(b) {
		return 0, false
	}
	for ; j < len(b); j++ {
		if !isDigit(b[j]) {
			return 0, false
		}
	}
	x, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
	x *= float64(scale)
	if err != nil || !(x >= 0 && x < 1<<62) {
		return 0, false
	}
	return int64(x), true
}

// parseRFC3339 parses 2006-01-02T15:04:05[.fraction](Z|+07:00|-07:00),
// the form time.Parse(time.RFC3339Nano, ...) takes on its fast path.
func parseRFC3339(b []byte) (int64, bool) {
	if len(b) < len("2006-01-02T15:04:05Z") || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := num(b[0:4], 0, 9999)
	month, ok2 := num(b[5:7], 1, 12)
	day, ok3 := num(b[8:10], 1, 31)
	hour, ok4 := num(b[11:13], 0, 23)
	minute, ok5 := num(b[14:16], 0, 59)
	sec, ok6 := num(b[17:19], 0, 59)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || day > daysIn(month, year) {
		return 0, false
	}
	b = b[19:]
	var frac int64
	if len(b) >= 2 && b[0] == '.' && isDigit(b[1]) {
		n, unit := 1, int64(100)
		for ; n < len(b) && isDigit(b[n]); n++ {
			frac += int64(b[n]-'0') * unit
			unit /= 10
		}
		b = b[n:]
	}
	var off int64
	switch {
	case len(b) == 1 && b[0] == 'Z':
	case len(b) == 6 && (b[0] == '+' || b[0] == '-') && b[3] == ':':
		oh, ok1 := num(b[1:3], 0, 23)
		om, ok2 := num(b[4:6], 0, 59)
		if !ok1 || !ok2 {
			return 0, false
		}
		off = int64(oh*60+om) * 60
		if b[0] == '-' {
			off = -off
		}
	default:
		return 0, false
	}
	return civilMs(year, month, day, hour, minute, sec, off) + frac, true
}

var monthNames = [12]string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}

// parseCLF parses the common log format's time, 10/Oct/2000:13:55:36 -0700
// (nginx's $time_local, Apache's %t), exactly: two-digit fields, an
// English month abbreviation in any case, a numeric zone.
func parseCLF(b []byte) (int64, bool) {
	if len(b) != len("10/Oct/2000:13:55:36 -0700") || b[2] != '/' || b[6] != '/' || b[11] != ':' ||
		b[14] != ':' || b[17] != ':' || b[20] != ' ' || b[21] != '+' && b[21] != '-' {
		return 0, false
	}
	month := 0
	for m, name := range monthNames {
		if asciiEqualFold(b[3:6], name) {
			month = m + 1
		}
	}
	year, ok1 := num(b[7:11], 0, 9999)
	day, ok2 := num(b[0:2], 1, 31)
	hour, ok3 := num(b[12:14], 0, 23)
	minute, ok4 := num(b[15:17], 0, 59)
	sec, ok5 := num(b[18:20], 0, 59)
	oh, ok6 := num(b[22:24], 0, 23)
	om, ok7 := num(b[24:26], 0, 59)
	if month == 0 || !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || day > daysIn(month, year) {
		return 0, false
	}
	off := int64(oh*60+om) * 60
	if b[21] == '-' {
		off = -off
	}
	return civilMs(year, month, day, hour, minute, sec, off), true
}

// num parses the decimal digits b (all digits) as a number in [lo, hi].
func num(b []byte, lo, hi int) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, lo <= n && n <= hi
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// civilMs returns the Unix time in milliseconds of a date and time at the
// zone offset off (seconds east of UTC). The day count is Howard Hinnant's
// days_from_civil.
func civilMs(year, month, day, hour, minute, sec int, off int64) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	days := era*146097 + doe - 719468
	secs := days*86400 + int64(hour)*3600 + int64(minute)*60 + int64(sec) - off
	return secs * 1000
}
