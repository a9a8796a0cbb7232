package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/detector"
	"github.com/hotspot-dev/hotspot/internal/ingest"
)

// topics returns the topics the detector reads: the input file's, or
// --topic.
func (c config) topics() []string {
	if c.inputs == nil {
		return []string{c.topic}
	}
	ts := make([]string, len(c.inputs.Inputs))
	for i, in := range c.inputs.Inputs {
		ts[i] = in.Topic
	}
	return ts
}

// detectorInputs returns the detector's inputs for --input (nil without
// one): format hotspot decodes as without the file, the others through
// package ingest, each dropped line counted in
// hotspot_input_dropped_total{topic, reason}.
func detectorInputs(ic *ingest.Config, maxKeyLen int, reg prometheus.Registerer) []detector.Input {
	if ic == nil {
		return nil
	}
	dropped := ingest.NewDropped(reg)
	out := make([]detector.Input, len(ic.Inputs))
	for i := range ic.Inputs {
		in := &ic.Inputs[i]
		out[i].Topic = in.Topic
		if in.Format == "hotspot" {
			continue // the detector's own decoder and hotspot_events_invalid_total
		}
		count := dropped.Counter(in.Topic)
		out[i].Decoder = func() detector.Decoder { return in.NewDecoder(maxKeyLen, count) }
	}
	return out
}

// checkInput is `hotspotd --check-input FILE [--sample LINE]`: it reports
// whether FILE is a valid input file and, with a sample, what the line
// becomes under each input (or only under --topic's input when given). It
// returns the exit status.
func checkInput(w io.Writer, path, topic, sample string, sampleGiven bool) int {
	ic, err := ingest.Load(path)
	if err != nil {
		fmt.Fprintf(w, "hotspotd: --check-input: %v\n", err)
		return 2
	}
	fmt.Fprintf(w, "%s: %d inputs, valid\n", path, len(ic.Inputs))
	for i, in := range ic.Inputs {
		if topic != "" && in.Topic != topic {
			continue
		}
		if !sampleGiven {
			fmt.Fprintf(w, "input %d: topic %q, format %s\n", i, in.Topic, in.Format)
			continue
		}
		fmt.Fprint(w, in.Explain([]byte(strings.TrimSuffix(sample, "\n"))))
	}
	return 0
}
