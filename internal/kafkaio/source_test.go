package kafkaio

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/access"
)

func TestNewSourceChecksConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  GroupConfig
		ok   bool
	}{
		{"brokers, topic and group", GroupConfig{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g"}, true},
		{"no brokers", GroupConfig{Topics: []string{"t"}, Group: "g"}, false},
		{"no group", GroupConfig{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}}, false},
		{"heartbeat above session", GroupConfig{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g",
			SessionTimeout: time.Second, HeartbeatInterval: 2 * time.Second}, false},
	} {
		_, err := NewSource(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: NewSource error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestSourceTakeover(t *testing.T) {
	for _, tc := range []struct {
		session, heartbeat, want time.Duration
	}{
		{0, 0, 9 * time.Second},
		{6 * time.Second, 0, 5 * time.Second},
		{6 * time.Second, 2 * time.Second, 4 * time.Second},
	} {
		s, err := NewSource(GroupConfig{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g",
			SessionTimeout: tc.session, HeartbeatInterval: tc.heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Takeover(); got != tc.want {
			t.Errorf("session %v, heartbeat %v: Takeover %v, want %v", tc.session, tc.heartbeat, got, tc.want)
		}
	}
}

// A Source joins nothing before its first Next: closing one never used
// returns at once, and a closed one hands out no generation.
func TestSourceClosedBeforeNext(t *testing.T) {
	s, err := NewSource(GroupConfig{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if gen, err := s.Next(t.Context()); err == nil {
		t.Fatalf("Next after Close: %v, want an error", gen)
	}
}

// A Reader's rewound error reaches the detector as access.ErrRewound, its
// text unchanged.
func TestRewoundWrapsBoth(t *testing.T) {
	inner := fmt.Errorf("kafkaio: fetch t partition 0: the log has ended: %w", ErrRewound)
	var err error = rewound{inner}
	if !errors.Is(err, access.ErrRewound) || !errors.Is(err, ErrRewound) {
		t.Fatalf("%v: does not wrap both access.ErrRewound and kafkaio.ErrRewound", err)
	}
	if got, want := err.Error(), inner.Error(); got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
}
