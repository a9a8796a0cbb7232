package loadgen

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Form is the shape of the Kafka records the generator writes.
type Form uint8

const (
	// FormBinary writes the SDK's binary batches (internal/wire), summed per
	// key over each Flush interval, one or more records per app, as the
	// hotcache reporter does. It is the default.
	FormBinary Form = iota
	// FormJSON writes one JSON object (one access) per record.
	FormJSON
	// FormNDJSON writes newline-separated JSON objects, Lines per record, as
	// a log shipper does.
	FormNDJSON
	// FormCombined writes each access as an nginx/Apache combined log line
	// (forms.go), one per record by default as a log shipper sends them, or
	// Lines per record. hotspotd reads it only through an input file:
	// InputFile gives the one that maps the lines back to (app, key).
	FormCombined
	// FormMappedJSON writes each access as a JSON object shaped like a
	// service's own access log (forms.go), not hotspot's event format: one
	// per record by default, or Lines per record. hotspotd reads it only
	// through an input file: InputFile gives the one that maps it back.
	FormMappedJSON

	numForms
)

var formNames = [numForms]string{
	FormBinary: "binary", FormJSON: "json", FormNDJSON: "ndjson",
	FormCombined: "combined", FormMappedJSON: "mapped-json",
}

// String returns "binary", "json", "ndjson", "combined" or "mapped-json".
func (f Form) String() string {
	if f < numForms {
		return formNames[f]
	}
	return "form(" + strconv.Itoa(int(f)) + ")"
}

// ParseForm parses a Form's String value.
func ParseForm(s string) (Form, error) {
	for f, name := range formNames {
		if s == name {
			return Form(f), nil
		}
	}
	return 0, fmt.Errorf("loadgen: unknown record form %q (want %s)", s, strings.Join(formNames[:], ", "))
}

// lines reports whether f's records hold Config.Lines lines, one access
// each.
// NeedsInputFile reports whether hotspotd reads records of form f only
// through an input file (InputFile; hotspotd --input): the access logs.
func (f Form) NeedsInputFile() bool { return f == FormCombined || f == FormMappedJSON }

func (f Form) lines() bool { return f == FormNDJSON || f == FormCombined || f == FormMappedJSON }

// NoBackground as Config.Rate turns the Zipf background off, leaving only the
// planted keys.
const NoBackground = -1

// SlotDuration is the resolution of the ground truth.
const SlotDuration = 100 * time.Millisecond

// Config describes a workload. A zero field means "use the default".
type Config struct {
	// Where records go: a kafka-go Writer to Brokers and Topic, unless Sink
	// is set.
	Brokers     []string // bootstrap addresses; required unless Sink is set
	Topic       string   // default hotset.DefaultTopic; must exist (see kafkaio.EnsureTopic)
	Compression string   // "", "none", "gzip", "snappy", "lz4" or "zstd"; default none
	MaxInflight int64    // bytes written to Kafka and not yet acknowledged before Write blocks; default 64 MiB
	// BatchTimeout is the kafka-go Writer's: how long a partition's batch
	// waits for more records before it is sent; default 5ms, as the
	// hotcache reporter.
	BatchTimeout time.Duration
	Sink         Sink // if set, receives the records instead of Kafka
	// Kafka is the writer's TLS and SASL; nil means plaintext, no auth.
	Kafka *kafkaio.Security

	// The Zipf background.
	Rate      float64 // background events/s; default 50,000; NoBackground for none
	Keys      uint64  // distinct background keys, ranks 1..Keys; default 1,000,000
	Skew      float64 // Zipf exponent s > 0 (P(rank k) ∝ k^-s); default 1.1
	KeyPrefix string  // background key of rank r is KeyPrefix + decimal r; default "k:"
	Apps      int     // apps "app0".."app<Apps-1>"; rank r belongs to app (r-1) mod Apps; default 1
	App       string  // the name of the single app when Apps is 1; default "app0"

	// Planted keys (flash crowds and fixed-rate keys).
	Flashes []Flash

	// Sources, if > 0, is how many app instances the accesses come from
	// (sources.go): each access is attributed to one, drawn over them
	// uniformly or, with SourceSkew, Zipf-distributed (instance 0 the
	// busiest); a Flash may give one instance a fixed share of its key
	// (TopSource, TopShare). The records carry it (binary: one version 3
	// batch per instance; JSON: "src"; combined and mapped-json: the client
	// address, which their input file maps), and the Truth keeps the
	// planted keys' counts per source. 0 (the default): no source, as
	// before; at most MaxSources.
	Sources    int
	SourceSkew float64 // Zipf exponent s > 0 over the instances; 0 (the default) means uniform; needs Sources
	// HideSources, with Sources and FormBinary, keeps each instance's
	// accesses in batches of its own but writes no source in them
	// (version 2): the same records and entries as with sources, for
	// measuring what carrying the source costs.
	HideSources bool

	// Timing.
	Duration time.Duration // how long to generate; 0 means until ctx is canceled
	Tick     time.Duration // pacing tick; default 10ms; must divide 100ms
	Flush    time.Duration // FormBinary: the interval summed into one batch; default 100ms; a multiple of Tick

	// Records.
	Form Form // default FormBinary
	// Lines is how many accesses (lines) a record of FormNDJSON,
	// FormCombined or FormMappedJSON holds; default 100 for FormNDJSON and
	// 1 for the other two (one line per record, as a log shipper sends).
	Lines        int
	BatchEntries int // FormBinary: (key, count) entries per record at most; default 1000
	// EarlyCount, if > 0, sends a planted key whose count in the batch being
	// filled reaches it at the end of the tick, at most once per Flush
	// interval and only until the key is hot (early.go): an early send by
	// the SDK's reporter, played to measure it. 0 (the default) sends every
	// count at the interval's end.
	EarlyCount uint64

	// Ground truth.
	Threshold float64 // the hot threshold the run is scored against, events/s; default 1000

	Seed     uint64       // random seed; 0 picks one (it is recorded in the Truth)
	Progress func(Stats)  // if set, called about once a second from Run's goroutine; must return quickly
	Logger   *slog.Logger // nil discards
}

// TrackFraction is the fraction of Config.Threshold at or above which a
// background key's expected rate puts it in the Truth.
const TrackFraction = 0.3

// maxTracked bounds the background ranks kept in the Truth, whatever the
// threshold (a threshold far below the head rates would otherwise track
// millions of keys).
const maxTracked = 100_000

// Check reports whether c is a valid workload, without contacting Kafka.
func (c Config) Check() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	c.Topic = cmp.Or(c.Topic, hotset.DefaultTopic)
	c.MaxInflight = cmp.Or(c.MaxInflight, 64<<20)
	switch {
	case c.Rate == 0:
		c.Rate = 50_000
	case c.Rate == NoBackground:
		c.Rate = 0
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return c, fmt.Errorf("loadgen: Rate %v must be > 0 (or NoBackground)", c.Rate)
	}
	c.Keys = cmp.Or(c.Keys, 1_000_000)
	c.Skew = cmp.Or(c.Skew, 1.1)
	c.KeyPrefix = cmp.Or(c.KeyPrefix, "k:")
	c.Apps = cmp.Or(c.Apps, 1)
	c.Tick = cmp.Or(c.Tick, 10*time.Millisecond)
	c.Flush = cmp.Or(c.Flush, 100*time.Millisecond)
	if c.Lines == 0 {
		c.Lines = 1
		if c.Form == FormNDJSON {
			c.Lines = 100
		}
	}
	c.BatchEntries = cmp.Or(c.BatchEntries, 1000)
	c.Threshold = cmp.Or(c.Threshold, 1000)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))

	switch {
	case c.Sink == nil && len(c.Brokers) == 0:
		return c, errors.New("loadgen: Brokers is required (or a Sink)")
	case c.Keys > math.MaxUint32:
		return c, fmt.Errorf("loadgen: Keys %d is above %d", c.Keys, uint64(math.MaxUint32))
	case !(c.Skew > 0) || math.IsInf(c.Skew, 0):
		return c, fmt.Errorf("loadgen: Skew %v must be > 0", c.Skew)
	case c.Apps < 1:
		return c, fmt.Errorf("loadgen: Apps %d must be >= 1", c.Apps)
	case c.App != "" && c.Apps != 1:
		return c, errors.New("loadgen: App names the single app; leave it empty when Apps > 1")
	case len(c.App) > wire.DefaultMaxKeyLen:
		return c, fmt.Errorf("loadgen: App is longer than %d bytes", wire.DefaultMaxKeyLen)
	case c.Duration < 0:
		return c, errors.New("loadgen: Duration must be >= 0")
	case c.Tick <= 0 || SlotDuration%c.Tick != 0 || c.Tick%time.Millisecond != 0:
		return c, fmt.Errorf("loadgen: Tick %v must be whole milliseconds dividing %v", c.Tick, SlotDuration)
	case c.Flush <= 0 || c.Flush%c.Tick != 0:
		return c, fmt.Errorf("loadgen: Flush %v must be a multiple of Tick %v", c.Flush, c.Tick)
	case c.Form >= numForms:
		return c, fmt.Errorf("loadgen: unknown %v", c.Form)
	case c.Lines < 1 || c.BatchEntries < 1:
		return c, errors.New("loadgen: Lines and BatchEntries must be >= 1")
	case c.Sources < 0 || c.Sources > MaxSources:
		return c, fmt.Errorf("loadgen: Sources %d must be in 0..%d", c.Sources, MaxSources)
	case c.SourceSkew < 0 || math.IsNaN(c.SourceSkew) || math.IsInf(c.SourceSkew, 0):
		return c, fmt.Errorf("loadgen: SourceSkew %v must be >= 0 (0: uniform)", c.SourceSkew)
	case c.HideSources && (c.Sources == 0 || c.Form != FormBinary):
		return c, fmt.Errorf("loadgen: HideSources needs Sources and the binary form")
	case c.SourceSkew > 0 && c.Sources == 0:
		return c, errors.New("loadgen: SourceSkew needs Sources > 0")
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return c, fmt.Errorf("loadgen: Threshold %v must be > 0", c.Threshold)
	case c.BatchTimeout < 0:
		return c, errors.New("loadgen: BatchTimeout must be >= 0")
	case c.MaxInflight < 1<<20:
		return c, errors.New("loadgen: MaxInflight must be at least 1 MiB")
	}
	if _, err := compression(c.Compression); err != nil {
		return c, err
	}
	for i, f := range c.Flashes {
		if err := f.check(); err != nil {
			return c, fmt.Errorf("loadgen: flash %d (%s): %w", i, f, err)
		}
		if len(f.Key) > wire.DefaultMaxKeyLen || len(f.App) > wire.DefaultMaxKeyLen {
			return c, fmt.Errorf("loadgen: flash %d: key or app longer than %d bytes", i, wire.DefaultMaxKeyLen)
		}
		if f.TopSource == "" {
			continue
		}
		switch {
		case c.Sources == 0:
			return c, fmt.Errorf("loadgen: flash %d (%s): a top source needs Sources > 0", i, f)
		case sourceIndex(c.Form, c.Sources, f.TopSource) < 0:
			return c, fmt.Errorf("loadgen: flash %d (%s): no source %q among the %d (%s..%s, or %s..%s)", i, f, f.TopSource,
				c.Sources, SourceName(FormJSON, 0), SourceName(FormJSON, c.Sources-1), SourceName(c.Form, 0), SourceName(c.Form, c.Sources-1))
		case f.TopShare < 1 && c.Sources < 2:
			return c, fmt.Errorf("loadgen: flash %d (%s): a top share below 1 needs another source (Sources >= 2)", i, f)
		}
	}
	if c.Rate == 0 && len(c.Flashes) == 0 {
		return c, errors.New("loadgen: no background and no planted keys: nothing to send")
	}
	if err := c.checkCarried(); err != nil {
		return c, err
	}
	return c, nil
}

// appNames returns the apps' names in order.
func (c Config) appNames() []string {
	if c.Apps == 1 {
		return []string{cmp.Or(c.App, "app0")}
	}
	names := make([]string, c.Apps)
	for i := range names {
		names[i] = "app" + strconv.Itoa(i)
	}
	return names
}
