package ingest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is a parsed, validated input file.
type Config struct {
	Inputs []Input // in file order; topics are unique
}

// Input is one validated input: a topic and how its records become
// accesses. Get one from Parse or Load. Its compiled spec is immutable and
// safe to share between goroutines that each use their own Decoder; Topic
// and Format are for reading (changing them changes nothing about
// decoding). A zero Input (not from Parse) decodes as format hotspot.
type Input struct {
	Topic  string // the Kafka topic
	Format string // "hotspot", "json", "regex" or "combined"; Parse fills in "hotspot" when the file leaves it out

	index int   // position in the file
	p     *plan // the compiled spec; nil means hotspot
}

// rawInput is an input as the file spells it.
type rawInput struct {
	Topic    *string           `yaml:"topic"`
	Format   *string           `yaml:"format"`
	App      *string           `yaml:"app"`
	AppField *string           `yaml:"app_field"`
	SrcField *string           `yaml:"source_field"`
	Key      *string           `yaml:"key"`
	Extract  *rawExtract       `yaml:"extract"`
	Where    map[string]string `yaml:"where"`
	Fields   *rawFields        `yaml:"fields"`
	Time     *string           `yaml:"time"`
	Pattern  *string           `yaml:"pattern"`
}

type rawExtract struct {
	Field   string `yaml:"field"`
	Pattern string `yaml:"pattern"`
}

type rawFields struct {
	Key    string `yaml:"key"`
	App    string `yaml:"app"`
	Time   string `yaml:"time"`
	Bytes  string `yaml:"bytes"`
	Op     string `yaml:"op"`
	Count  string `yaml:"count"`
	Source string `yaml:"source"`
}

// each calls fn for every field name given, in a fixed order.
func (f *rawFields) each(fn func(role, name string)) {
	for _, p := range [...]struct{ role, name string }{
		{"key", f.Key}, {"app", f.App}, {"time", f.Time}, {"bytes", f.Bytes}, {"op", f.Op}, {"count", f.Count},
		{"source", f.Source},
	} {
		if p.name != "" {
			fn(p.role, p.name)
		}
	}
}

// Load reads and parses the input file at path; see Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return Parse(data)
}

// Parse parses an input file (YAML 1.2; JSON is YAML too) and validates it
// whole: the error lists every problem found, each naming the input (its
// index in the file and its topic), the setting and what is wrong. The
// file's contract is docs/ingest.md.
func Parse(data []byte) (*Config, error) {
	// YAML 1.2 (go.yaml.in/yaml/v3), not the YAML 1.1 of sigs.k8s.io/yaml:
	// there an unquoted n, y, no, on or off is a boolean, so "count: n"
	// would silently name the path "false".
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("ingest: no inputs (the file is empty)")
	}
	top := deref(doc.Content[0])
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("ingest: line %d: the file must be a mapping with one key, inputs", top.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		switch {
		case k.Value != "inputs":
			return nil, fmt.Errorf("ingest: line %d: unknown key %q (the file has one key, inputs)", k.Line, k.Value)
		case list != nil:
			return nil, fmt.Errorf("ingest: line %d: inputs given twice", k.Line)
		}
		list = deref(top.Content[i+1])
	}
	if list == nil || list.Kind == yaml.ScalarNode && list.Tag == "!!null" || list.Kind == yaml.SequenceNode && len(list.Content) == 0 {
		return nil, errors.New("ingest: no inputs")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("ingest: line %d: inputs must be a list", list.Line)
	}
	cfg := &Config{Inputs: make([]Input, 0, len(list.Content))}
	var errs []error
	topics := make(map[string]int)
	for i, n := range list.Content {
		c := compiler{idx: i}
		ri, ok := c.decode(deref(n))
		if !ok {
			errs = append(errs, c.errs...)
			continue
		}
		in := c.compile(ri)
		if j, dup := topics[in.Topic]; dup && in.Topic != "" {
			c.errorf("topic", "%q is also the topic of input %d (one input per topic)", in.Topic, j)
		} else {
			topics[in.Topic] = i
		}
		if len(c.errs) > 0 {
			errs = append(errs, c.errs...)
			continue
		}
		cfg.Inputs = append(cfg.Inputs, in)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("ingest: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// deref follows YAML aliases to the node they stand for.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// settings are the keys an input (and its extract and fields mappings)
// may have.
var settings = map[string][]string{
	"":        {"topic", "format", "app", "app_field", "source_field", "key", "extract", "where", "fields", "time", "pattern"},
	"extract": {"field", "pattern"},
	"fields":  {"key", "app", "time", "bytes", "op", "count", "source"},
}

// decode checks the keys of the input at n (YAML decoding knows no strict
// mode for a node) and decodes it.
func (c *compiler) decode(n *yaml.Node) (*rawInput, bool) {
	if n.Kind != yaml.MappingNode {
		c.errorf("", "line %d: an input must be a mapping", n.Line)
		return nil, false
	}
	c.checkKeys(n, "")
	if len(c.errs) > 0 {
		return nil, false
	}
	var ri rawInput
	if err := n.Decode(&ri); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
		msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
		msg = strings.NewReplacer("!!seq", "a list", "!!map", "a mapping", "into map[string]string", "into a mapping of field to pattern",
			"into string", "into a string", "into ingest.rawExtract", "into a mapping", "into ingest.rawFields", "into a mapping").Replace(msg)
		c.errorf("", "%s", msg)
		return nil, false
	}
	return &ri, true
}

// checkKeys reports the keys of mapping n that are not settings of kind
// ("" for an input; "extract" or "fields").
func (c *compiler) checkKeys(n *yaml.Node, kind string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if k.Value == "topic" && kind == "" && v.Kind == yaml.ScalarNode {
			c.topic = v.Value // for the messages
		}
		switch {
		case k.Value == "<<": // a merge key
		case !slices.Contains(settings[kind], k.Value):
			what := k.Value
			if kind != "" {
				what = kind + "." + k.Value
			}
			c.errorf(what, "unknown setting (line %d; want one of %s)", k.Line, strings.Join(settings[kind], ", "))
		case kind == "" && (k.Value == "extract" || k.Value == "fields") && v.Kind == yaml.MappingNode:
			c.checkKeys(v, k.Value)
		}
	}
}
