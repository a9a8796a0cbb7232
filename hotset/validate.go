package hotset

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Whoever can write a node can feed every reader, so each reader checks what
// it decodes against these bounds before acting on it.
const (
	// maxKeys bounds the keys of one Shard node (the aggregator's default
	// MaxKeysPerNode is 10_000; MaxBytes alone would allow about 40_000).
	maxKeys = 50_000
	// maxKeyLen bounds a published key or app name, in bytes (the access
	// decoder's default limit).
	maxKeyLen = 1024
	// maxTTL bounds a node's TTL: PinTTL, which operator nodes use.
	maxTTL = PinTTL
	// maxRules bounds a key's rule index (package rules' MaxRules).
	maxRules = 1000
)

// ErrInvalid is wrapped by the errors of Decode and DecodeMember for content
// that parses but breaks a bound.
var ErrInvalid = errors.New("hotset: invalid node")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// validate checks a decoded Shard: TTL in (0, maxTTL], at most maxKeys keys,
// each 1..maxKeyLen bytes of UTF-8 with a finite rate >= 0, a known source
// and kind, and a rule index in -1..maxRules-1.
func (s *Shard) validate() error {
	switch {
	case s.TTL <= 0 || s.TTL > maxTTL:
		return invalid("ttl %d ms out of (0, %d]", s.TTL, maxTTL)
	case s.Updated < 0:
		return invalid("updated %d before 1970", s.Updated)
	case len(s.Keys) > maxKeys:
		return invalid("%d keys, more than %d", len(s.Keys), maxKeys)
	case len(s.App) > maxKeyLen || !utf8.ValidString(s.App):
		return invalid("app name is not 0..%d bytes of UTF-8", maxKeyLen)
	}
	for i, k := range s.Keys {
		switch {
		case len(k.Key) == 0 || len(k.Key) > maxKeyLen || !utf8.ValidString(k.Key):
			return invalid("key %d is not 1..%d bytes of UTF-8", i, maxKeyLen)
		case math.IsNaN(k.Rate) || math.IsInf(k.Rate, 0) || k.Rate < 0:
			return invalid("key %q: rate %v", k.Key, k.Rate)
		case k.Source != "" && k.Source != "detected" && k.Source != "pinned":
			return invalid("key %q: unknown source %q", k.Key, k.Source)
		case k.Kind != "" && k.Kind != "count" && k.Kind != "bytes" && k.Kind != "write":
			return invalid("key %q: unknown kind %q", k.Key, k.Kind)
		case k.Rule != nil && (*k.Rule < -1 || *k.Rule >= maxRules):
			return invalid("key %q: rule %d out of -1..%d", k.Key, *k.Rule, maxRules-1)
		}
	}
	return nil
}

// validate checks a decoded Member: an id and a host:port address.
func (m Member) validate() error {
	if m.ID == "" || len(m.ID) > maxKeyLen {
		return invalid("member id is not 1..%d bytes", maxKeyLen)
	}
	return checkAddr(m.Addr)
}

// checkAddr reports whether addr is a plain host:port that can be put in a
// URL as its authority and nothing else: a host name or IP address (no
// path, query, user info or spaces) and a port in 1..65535. A member whose
// address is "host/steal?x=" must never be dialed.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid("address %q is not host:port: %v", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || port[0] == '0' && port != "0" || port[0] == '+' {
		return invalid("address %q: port %q is not 1..65535", addr, port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if host == "" || len(host) > 253 {
		return invalid("address %q: empty or overlong host", addr)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return invalid("address %q: host %q is not a DNS name", addr, host)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return invalid("address %q: host %q is not a DNS name or IP address", addr, host)
			}
		}
	}
	return nil
}
