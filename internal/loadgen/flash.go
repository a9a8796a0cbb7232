package loadgen

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Flash is a planted key: a flash crowd that ramps up linearly from 0 to
// Rate over Ramp, starting Start after the run begins, and holds Rate until
// End (or the end of the run). A planted key at a fixed rate, as accuracy
// tests use, is a Flash with Start 0 and Ramp 0.
type Flash struct {
	App   string        // "" means the run's first app
	Key   string        // required
	Start time.Duration // offset from the run's start; >= 0
	Ramp  time.Duration // time to go from 0 to Rate; 0 means a step
	End   time.Duration // offset at which it stops; 0 means never
	Rate  float64       // events/s once ramped up; > 0

	// TopSource, with Config.Sources, is the instance that sends TopShare
	// (0 < TopShare <= 1) of the key's events, exactly: of the first n
	// events, floor(TopShare*n). The others are drawn over the other
	// instances as Config.SourceSkew says. It names an instance as
	// "inst-<i>" or as the form's records carry it (SourceName). "" (the
	// default): every event is drawn over all instances.
	TopSource string
	TopShare  float64
}

// ParseFlash parses a flash-crowd spec:
//
//	[APP/]KEY@START[+RAMP][..END]=RATE[x][~SOURCE:SHARE]
//
// START, RAMP and END are Go durations measured from the run's start; RATE is
// in events/s, or, with a trailing "x", a multiple of threshold; SOURCE and
// SHARE are TopSource and TopShare (a fraction, or a percentage with "%":
// "~inst-0:0.7" and "~inst-0:70%" are the same). The key is
// everything before the last '@' (after "APP/" when the text before the first
// '/' is not empty), so a key may hold '@' and '='; a key that holds '/' needs
// an explicit app. Examples: "item:hot@10s+2s=3000",
// "shop/cart:7@0s..30s=1.2x", "default//api/v1@5s=800",
// "item:42@0s=2x~inst-0:0.7".
func ParseFlash(spec string, threshold float64) (Flash, error) {
	bad := func(why string) (Flash, error) {
		return Flash{}, fmt.Errorf("loadgen: flash %q: %s (want [APP/]KEY@START[+RAMP][..END]=RATE[x][~SOURCE:SHARE])", spec, why)
	}
	eq := strings.LastIndexByte(spec, '=')
	if eq < 0 {
		return bad("no '=RATE'")
	}
	rest, rateText := spec[:eq], spec[eq+1:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return bad("no '@START'")
	}
	var f Flash
	name, timing := rest[:at], rest[at+1:]
	if slash := strings.IndexByte(name, '/'); slash > 0 {
		f.App, name = name[:slash], name[slash+1:]
	}
	if name == "" {
		return bad("empty key")
	}
	f.Key = name

	if before, after, ok := strings.Cut(timing, ".."); ok {
		end, err := time.ParseDuration(after)
		if err != nil {
			return bad("END: " + err.Error())
		}
		f.End, timing = end, before
	}
	startText, rampText, hasRamp := strings.Cut(timing, "+")
	start, err := time.ParseDuration(startText)
	if err != nil {
		return bad("START: " + err.Error())
	}
	f.Start = start
	if hasRamp {
		if f.Ramp, err = time.ParseDuration(rampText); err != nil {
			return bad("RAMP: " + err.Error())
		}
	}

	if before, split, ok := strings.Cut(rateText, "~"); ok {
		rateText = before
		colon := strings.LastIndexByte(split, ':')
		if colon <= 0 {
			return bad("no 'SOURCE:SHARE' after '~'")
		}
		src, shareText := split[:colon], split[colon+1:]
		scale := 1.0
		if t, ok := strings.CutSuffix(shareText, "%"); ok {
			shareText, scale = t, 100
		}
		share, err := strconv.ParseFloat(shareText, 64)
		if err != nil {
			return bad("SHARE: " + err.Error())
		}
		f.TopSource, f.TopShare = src, share/scale
	}
	times := strings.HasSuffix(rateText, "x")
	rate, err := strconv.ParseFloat(strings.TrimSuffix(rateText, "x"), 64)
	if err != nil {
		return bad("RATE: " + err.Error())
	}
	if times {
		if !(threshold > 0) {
			return bad("a RATE in multiples of the threshold needs a threshold > 0")
		}
		rate *= threshold
	}
	f.Rate = rate
	if err := f.check(); err != nil {
		return bad(err.Error())
	}
	return f, nil
}

// String returns f in ParseFlash's syntax, with the rate in events/s.
func (f Flash) String() string {
	var b strings.Builder
	if f.App != "" {
		b.WriteString(f.App + "/")
	}
	b.WriteString(f.Key + "@" + f.Start.String())
	if f.Ramp > 0 {
		b.WriteString("+" + f.Ramp.String())
	}
	if f.End > 0 {
		b.WriteString(".." + f.End.String())
	}
	b.WriteString("=" + strconv.FormatFloat(f.Rate, 'g', -1, 64))
	if f.TopSource != "" {
		b.WriteString("~" + f.TopSource + ":" + strconv.FormatFloat(f.TopShare, 'g', -1, 64))
	}
	return b.String()
}

func (f Flash) check() error {
	switch {
	case f.Key == "":
		return errors.New("empty key")
	case f.Start < 0 || f.Ramp < 0 || f.End < 0:
		return errors.New("negative START, RAMP or END")
	case f.End > 0 && f.End <= f.Start:
		return errors.New("END must be after START")
	case !(f.Rate > 0) || math.IsInf(f.Rate, 0):
		return errors.New("RATE must be > 0")
	case f.TopSource == "" && f.TopShare != 0:
		return errors.New("a top share without a top source")
	case f.TopSource != "" && !(f.TopShare > 0 && f.TopShare <= 1):
		return errors.New("the top source's SHARE must be in (0, 1]")
	}
	return nil
}

// Planted returns fixed-rate planted keys, one per multiple of threshold,
// from the run's start to its end, named "planted:<multiple>x" (for example
// "planted:1.2x" at 1.2 * threshold events/s), for accuracy tests.
func Planted(app string, threshold float64, multiples ...float64) []Flash {
	fs := make([]Flash, 0, len(multiples))
	for _, m := range multiples {
		fs = append(fs, Flash{
			App:  app,
			Key:  "planted:" + strconv.FormatFloat(m, 'g', -1, 64) + "x",
			Rate: m * threshold,
		})
	}
	return fs
}

// RateAt is f's rate, events/s, at offset d from the run's start: 0
// before Start and from End on, ramping up linearly over Ramp, then Rate.
func (f Flash) RateAt(d time.Duration) float64 {
	switch {
	case d < f.Start, f.End > 0 && d >= f.End:
		return 0
	case d >= f.Start+f.Ramp:
		return f.Rate
	default:
		return f.Rate * float64(d-f.Start) / float64(f.Ramp)
	}
}

// cumulative returns the number of events the flash has produced by offset d
// from the run's start, as a real number: the integral of its rate. The
// generator sends floor(cumulative(end of tick)) - floor(cumulative(start of
// tick)) events in each tick, so totals are exact and no remainder is lost.
func (f Flash) cumulative(d time.Duration) float64 {
	if f.End > 0 && d > f.End {
		d = f.End
	}
	e := d - f.Start
	if e <= 0 {
		return 0
	}
	if e <= f.Ramp {
		// Rate * e^2 / (2 * Ramp), in an order that keeps integers exact
		// for as long as float64 can.
		x := float64(e) / float64(f.Ramp)
		return f.Rate * float64(e) / 1e9 * x / 2
	}
	return f.Rate*float64(f.Ramp)/2e9 + f.Rate*float64(e-f.Ramp)/1e9
}
