package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/detector"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/ingest"
	"github.com/hotspot-dev/hotspot/rules"
)

type config struct {
	brokers     []string
	topic       string
	input       string         // --input: the file of inputs, "" for none
	inputs      *ingest.Config // its inputs, nil without it
	checkInput  string         // --check-input: check this input file and exit
	sample      string         // --sample: a line to explain with --check-input
	group       string
	zk          []string
	zkRoot      string
	httpAddr    string
	advertise   string // host:port other processes reach this one at
	id          string
	detector    bool
	aggregator  bool
	threshold   float64
	aggMaxMiB   int64 // --aggregator-max-mib: heap of the aggregator's tracked keys (aggregator.Config.MaxBytes)
	window      time.Duration
	hold        time.Duration // a hot key stays hot until its rate was below the low mark this long
	lowMark     float64       // the low mark, a fraction of the threshold in (0, 1]
	filterLoss  float64       // the detectors' filter's Alpha: what it may under-count, a fraction of the threshold
	fromOldest  bool
	fetchWait   time.Duration
	fetchMin    int
	commitEvery time.Duration
	stallHold   time.Duration
	partitions  int
	replicas    int // replication factor of a created access topic; 0: the brokers' default
	adminToken  string
	pprof       bool
	logLevel    slog.Level
	sec         security
	// rebound is the --http-addr given when an open cluster (no secret)
	// was moved to loopback; "" otherwise.
	rebound string

	redis            string        // host:port or redis:// URL of the history's Redis; "" keeps no history
	redisUser        string        // its ACL user; the password comes from HOTSPOT_REDIS_PASSWORD (security.go)
	redisTLSCA       string        // PEM CA: talk TLS to it
	historyMaxLen    int64         // events kept per app, about
	historyRetention time.Duration // events older are trimmed; 0 keeps them until historyMaxLen
}

const hotspotdHelp = `Hotspot's server: detector and aggregator roles plus the HTTP API.`

// parseConfig reads the flags and their HOTSPOT_* variables (envflag's
// rule), then checks them and fills in the defaults that depend on others.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := envflag.New("hotspotd", "HOTSPOT", hotspotdHelp)
	var c config
	var l lists
	declareFlags(fs, &c, &l)
	if err := envflag.Parse(fs, "HOTSPOT", args, getenv); err != nil {
		return config{}, err
	}
	if err := c.convert(l); err != nil {
		return c, err
	}
	if err := c.secure(l.sec, getenv); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	return c, c.fillAddrs()
}

// lists are the flag values that convert into config fields.
type lists struct {
	brokers, zk, roles, logLevel string
	sec                          securityFlags // resolved by secure
}

// declareFlags declares hotspotd's flags on fs, to be parsed into c and l.
func declareFlags(fs *flag.FlagSet, c *config, l *lists) {
	fs.StringVar(&l.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap brokers, comma-separated")
	fs.StringVar(&c.topic, "topic", "", "access-event topic (default "+hotset.DefaultTopic+"; with --input, one of the file's topics or empty)")
	fs.StringVar(&c.checkInput, "check-input", "", "check this input file, print what --sample's line becomes under each input (or --topic's), and exit")
	fs.StringVar(&c.sample, "sample", "", "with --check-input: a record's line to explain")
	fs.StringVar(&c.input, "input", "", "YAML file of inputs: the topics to read and how their records (access logs in other formats) become accesses (docs/ingest.md)")
	fs.StringVar(&c.group, "group", hotset.DefaultGroup, "detector consumer group")
	fs.StringVar(&l.zk, "zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated")
	fs.StringVar(&c.zkRoot, "zk-root", hotset.DefaultRoot, "ZooKeeper root of everything Hotspot keeps")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:7070", "HTTP listen address (API, metrics, internal aggregator API)")
	fs.StringVar(&c.advertise, "advertise-addr", "", "host:port other hotspotd processes reach this one at (default: --http-addr)")
	fs.StringVar(&c.id, "id", "", "aggregator shard id, stable across restarts (default: host name and HTTP port)")
	fs.StringVar(&l.roles, "roles", "detector,aggregator", "roles to run: detector, aggregator or both")
	fs.Float64Var(&c.threshold, "threshold", 1000, "accesses per second that make a key hot")
	fs.DurationVar(&c.window, "window", time.Second, "sliding window of the rate, a multiple of 100ms")
	fs.DurationVar(&c.hold, "hold", 2*time.Second, "a hot key turns cold once its rate stayed below the low mark this long (the default rule's hold)")
	fs.Float64Var(&c.lowMark, "low-mark", 0.8, "the rate a hot key must fall below to start turning cold, as a fraction of the threshold, in (0, 1]")
	fs.Int64Var(&c.aggMaxMiB, "aggregator-max-mib", 128, "MiB of heap the aggregator's tracked keys may take: colder keys are evicted past it (a key takes about 0.5 KB\nunder a 1 s rule, 5.7 KB under a 60 s one; docs/aggregator.md)")
	fs.Float64Var(&c.filterLoss, "filter-loss", detector.DefaultAlpha, "the most the detectors' filter may under-count a key's rate by, as a fraction of the threshold, all\ndetectors together; more drops more one-off keys (docs/detector.md); negative forwards every access")
	fs.BoolVar(&c.fromOldest, "from-oldest", false, "read partitions without a committed offset from the oldest record")
	fs.DurationVar(&c.fetchWait, "fetch-max-wait", 250*time.Millisecond, "longest a detector's fetch waits on a partition with no new record")
	fs.IntVar(&c.fetchMin, "fetch-min-bytes", 1, "bytes a detector's fetch waits for (up to --fetch-max-wait) before the broker answers; 1 answers at the first record")
	fs.DurationVar(&c.commitEvery, "commit-interval", 0, "how often a detector commits its offsets, each commit a log append on the broker (0: every 1s, or every 100ms round with a --window of 5s or more)")
	fs.DurationVar(&c.stallHold, "stall-hold", 5*time.Second, "longest a detector's partition whose records stopped coming (a leader move, writes waiting for the in-sync\nreplicas) holds the window: hot keys keep their rate meanwhile (docs/detector.md, \"Stalled partitions\"); negative never holds")
	fs.IntVar(&c.partitions, "partitions", 8, "partitions of the access topic when the detector has to create it")
	fs.IntVar(&c.replicas, "replication-factor", 0, "replication factor of the access topic when the detector has to create it; 0 takes the brokers'\ndefault.replication.factor")
	fs.BoolVar(&c.pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address")
	fs.StringVar(&c.adminToken, "admin-token", "", "bearer token that authorizes pin, block and webhook changes; empty refuses them")
	fs.StringVar(&c.redis, "redis", "127.0.0.1:16379", "Redis for the promotion history: host:port or redis://[:password@]host:port/db; empty keeps no history")
	fs.StringVar(&c.redisUser, "redis-user", "", "ACL user of the history's Redis (password from HOTSPOT_REDIS_PASSWORD)")
	fs.StringVar(&c.redisTLSCA, "redis-tls-ca", "", "PEM CA bundle: talk TLS to the history's Redis, verifying it with this CA")
	fs.Int64Var(&c.historyMaxLen, "history-maxlen", 100_000, "promotions and demotions kept per app in the history, about")
	fs.DurationVar(&c.historyRetention, "history-retention", 7*24*time.Hour, "history events older than this are trimmed; 0 keeps them until --history-maxlen")
	fs.StringVar(&l.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	l.sec = addSecurityFlags(fs)
}

// convert sets the fields that come from lists: servers, roles, log level.
func (c *config) convert(l lists) error {
	c.brokers, c.zk = envflag.SplitList(l.brokers), envflag.SplitList(l.zk)
	for _, r := range envflag.SplitList(l.roles) {
		switch r {
		case "detector":
			c.detector = true
		case "aggregator":
			c.aggregator = true
		default:
			return fmt.Errorf("--roles: unknown role %q (want detector, aggregator or both)", r)
		}
	}
	if err := c.logLevel.UnmarshalText([]byte(l.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	return c.readInputs()
}

// readInputs reads --input, whose topics replace --topic.
func (c *config) readInputs() error {
	if c.input == "" {
		if c.checkInput == "" { // which filters by the --topic given
			c.topic = cmp.Or(c.topic, hotset.DefaultTopic)
		}
		return nil
	}
	ic, err := ingest.Load(c.input)
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	c.inputs = ic
	if ts := c.topics(); c.topic != "" && !slices.Contains(ts, c.topic) {
		return fmt.Errorf("--topic %q is not one of the --input file's topics (%s)", c.topic, strings.Join(ts, ", "))
	}
	c.topic = ic.Inputs[0].Topic
	return nil
}

// secure reads the security flags' files and variables (security.go) and
// confines an open cluster, one without a secret, to loopback.
func (c *config) secure(f securityFlags, getenv func(string) string) error {
	var err error
	if c.sec, c.adminToken, err = f.resolve(getenv, c.adminToken); err != nil {
		return err
	}
	if c.sec.clusterSecret == nil {
		if addr, moved := openCluster(c.httpAddr); moved {
			c.rebound, c.httpAddr = c.httpAddr, addr
		}
	}
	return nil
}

// check refuses values hotspotd cannot run with.
func (c config) check() error {
	if !c.detector && !c.aggregator {
		return fmt.Errorf("--roles: at least one of detector, aggregator")
	}
	if c.detector && len(c.brokers) == 0 {
		return fmt.Errorf("--brokers: the detector role needs at least one broker")
	}
	if len(c.zk) == 0 {
		return fmt.Errorf("--zk: at least one ZooKeeper server")
	}
	if !strings.HasPrefix(c.zkRoot, "/") || (len(c.zkRoot) > 1 && strings.HasSuffix(c.zkRoot, "/")) {
		return fmt.Errorf("--zk-root: %q must be an absolute znode path without a trailing slash", c.zkRoot)
	}
	if !(c.threshold > 0) {
		return fmt.Errorf("--threshold: %v is not a positive number", c.threshold)
	}
	if c.window < 100*time.Millisecond || c.window%(100*time.Millisecond) != 0 {
		return fmt.Errorf("--window: %v must be a multiple of 100ms", c.window)
	}
	if c.hold <= 0 || c.hold > rules.MaxHold {
		return fmt.Errorf("--hold: %v out of range (0, %v]", c.hold, rules.MaxHold)
	}
	if !(c.lowMark > 0 && c.lowMark <= 1) {
		return fmt.Errorf("--low-mark: %v out of range (0, 1]", c.lowMark)
	}
	if math.IsNaN(c.filterLoss) || c.filterLoss == 0 || c.filterLoss >= 1 {
		return fmt.Errorf("--filter-loss: %v out of range: (0, 1), or negative for no filter", c.filterLoss)
	}
	if c.aggMaxMiB < 1 || c.aggMaxMiB > 1<<30 {
		return fmt.Errorf("--aggregator-max-mib: %d out of range [1, %d]", c.aggMaxMiB, 1<<30)
	}
	if c.partitions < 1 {
		return fmt.Errorf("--partitions: %d is not a positive integer", c.partitions)
	}
	if c.replicas < 0 {
		return fmt.Errorf("--replication-factor: %d must be >= 0 (0: the brokers' default)", c.replicas)
	}
	if c.commitEvery < 0 {
		return fmt.Errorf("--commit-interval: %v must be >= 0", c.commitEvery)
	}
	if c.historyMaxLen < 1 {
		return fmt.Errorf("--history-maxlen: %d is not a positive integer", c.historyMaxLen)
	}
	if c.historyRetention < 0 {
		return fmt.Errorf("--history-retention: %v must be >= 0", c.historyRetention)
	}
	return nil
}

// defaultRule is the rule of every key no rule of its app matches.
func (c config) defaultRule() rules.Effective {
	return rules.Default(c.threshold, c.window, c.hold, c.lowMark)
}

// fillAddrs derives the advertised address and the id from --http-addr when
// they are not given.
func (c *config) fillAddrs() error {
	host, port, err := net.SplitHostPort(c.httpAddr)
	if err != nil {
		return fmt.Errorf("--http-addr: %w", err)
	}
	if c.advertise == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			h, _ := os.Hostname()
			host = h
		}
		c.advertise = net.JoinHostPort(host, port)
	}
	if c.id == "" {
		h, _ := os.Hostname()
		c.id = h + "-" + port
	}
	return nil
}
