package clusterauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"sync/atomic"
	"time"
)

// The headers a signed request carries.
const (
	HeaderSource    = "X-Hotspot-Source"    // sender id
	HeaderTime      = "X-Hotspot-Time"      // Unix milliseconds at signing
	HeaderSeq       = "X-Hotspot-Seq"       // per-sender sequence number, decimal
	HeaderSignature = "X-Hotspot-Signature" // "v1=" + hex HMAC-SHA256
)

// MinSecretLen is the shortest accepted cluster secret, in bytes.
const MinSecretLen = 16

// ErrShortSecret is returned for a secret shorter than MinSecretLen.
var ErrShortSecret = errors.New("clusterauth: cluster secret shorter than 16 bytes")

// emptyBodyHash is the SHA-256 of no bytes.
var emptyBodyHash = sha256.Sum256(nil)

// message writes what is signed into mac: a version tag and each field on
// its own line. Newlines cannot occur in a method, an escaped request target,
// a hex digest or a decimal number; the source comes last but one and the
// sequence, a number, last, so no two field lists write the same bytes.
func message(mac hash.Hash, method, target string, bodySum []byte, ms int64, source string, seq uint64) []byte {
	mac.Reset()
	var num [20]byte
	mac.Write([]byte("hotspot-cluster-v1\n"))
	mac.Write([]byte(method))
	mac.Write([]byte{'\n'})
	mac.Write([]byte(target))
	mac.Write([]byte{'\n'})
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], bodySum)
	mac.Write(hx[:])
	mac.Write([]byte{'\n'})
	mac.Write(strconv.AppendInt(num[:0], ms, 10))
	mac.Write([]byte{'\n'})
	mac.Write(strconv.AppendUint(num[:0], uint64(len(source)), 10))
	mac.Write([]byte{':'})
	mac.Write([]byte(source))
	mac.Write([]byte{'\n'})
	mac.Write(strconv.AppendUint(num[:0], seq, 10))
	return mac.Sum(nil)
}

// Signer signs requests as one sender. It is safe for concurrent use; give
// every client of a process the same Signer so that they share one sequence.
type Signer struct {
	secret []byte
	source string
	seq    atomic.Uint64
	now    func() time.Time
}

// NewSigner returns a Signer for the sender id source (e.g. the hotspotd id).
func NewSigner(secret []byte, source string) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, ErrShortSecret
	}
	if source == "" {
		return nil, errors.New("clusterauth: empty source")
	}
	s := &Signer{secret: append([]byte(nil), secret...), source: source, now: time.Now}
	s.seq.Store(uint64(time.Now().UnixNano()))
	return s, nil
}

// Headers returns the four header values for a request; bodySum is the
// SHA-256 of the body. Each call takes a new sequence number.
func (s *Signer) Headers(method, target string, bodySum []byte) (source, ms, seq, sig string) {
	t := s.now().UnixMilli()
	n := s.seq.Add(1)
	mac := hmac.New(sha256.New, s.secret)
	sum := message(mac, method, target, bodySum, t, s.source, n)
	return s.source, strconv.FormatInt(t, 10), strconv.FormatUint(n, 10), "v1=" + hex.EncodeToString(sum)
}
