package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// consumedTopic asks the hotspotd at addr (/v1/config) which access topic
// its detector consumes: with --input, the input file's topics,
// comma-separated. It returns "" when the process runs no detector or is
// too old to say.
func consumedTopic(ctx context.Context, addr string) (string, error) {
	c, err := apiClient(addr, "")
	if err != nil {
		return "", err
	}
	cfg, err := c.Config(ctx)
	return cfg.Topic, err
}

// topicMismatch returns why none of the hotspotd processes at addrs
// consumes topic, or "" when one does, or when none says which topic it
// consumes (no detector, an older hotspotd, or no answer: the caller finds
// out about those otherwise).
func topicMismatch(ctx context.Context, addrs []string, topic string) string {
	var others []string
	for _, a := range addrs {
		t, err := consumedTopic(ctx, a)
		switch {
		case err != nil || t == "":
			continue
		case slices.Contains(strings.Split(t, ","), topic):
			return ""
		}
		others = append(others, fmt.Sprintf("hotspotd at %s consumes topic %q", a, t))
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, not %q (set --topic to the topic hotspotd consumes)", strings.Join(others, "; "), topic)
}
