package clusterauth

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Config tunes a Verifier. A zero field means its default.
type Config struct {
	MaxSkew    time.Duration         // largest accepted |sender time - our time|; 0 means 30s
	MaxBody    int64                 // largest body hashed; 413 above it; 0 means 1 MiB
	MaxSources int                   // senders whose sequence windows are kept; 0 means 4096
	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
}

// Verifier checks signed requests. It is safe for concurrent use.
type Verifier struct {
	secrets [][]byte // any of them verifies (rotation: old and new)
	cfg     Config
	now     func() time.Time
	m       *prometheus.CounterVec

	mu      sync.Mutex // guards sources
	sources map[string]*window
}

// window is one sender's replay window: the highest sequence accepted and a
// bitmap of the replayWindow sequences below it (bit i: highest-i seen).
// Requests of one sender may arrive slightly out of order (parallel posts,
// fan-out), so a sequence up to replayWindow below the highest is accepted
// once; anything older is refused.
type window struct {
	highest uint64
	seen    [replayWindow / 64]uint64
	last    time.Time // when the sender was last accepted
}

const replayWindow = 1024

// Reasons a request is refused, the values of the metric's reason label.
const (
	reasonMissing   = "missing"   // a header absent or malformed
	reasonSignature = "signature" // the HMAC does not match
	reasonSkew      = "skew"      // time outside MaxSkew
	reasonReplay    = "replay"    // (sender, sequence) accepted before, or too old
	reasonTooLarge  = "too_large" // body over MaxBody
)

// NewVerifier returns a Verifier that accepts requests signed with the
// cluster secret or, during a rotation, with any of the older secrets given.
func NewVerifier(secret []byte, cfg Config, older ...[]byte) (*Verifier, error) {
	secrets := [][]byte{append([]byte(nil), secret...)}
	for _, o := range older {
		secrets = append(secrets, append([]byte(nil), o...))
	}
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			return nil, ErrShortSecret
		}
	}
	cfg.MaxSkew = cmp.Or(cfg.MaxSkew, 30*time.Second)
	cfg.MaxBody = cmp.Or(cfg.MaxBody, 1<<20)
	cfg.MaxSources = cmp.Or(cfg.MaxSources, 4096)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.MaxSkew < 0 || cfg.MaxBody < 0 || cfg.MaxSources < 0 {
		return nil, errors.New("clusterauth: MaxSkew, MaxBody and MaxSources must be >= 0")
	}
	v := &Verifier{
		secrets: secrets,
		cfg:     cfg,
		now:     time.Now,
		sources: make(map[string]*window),
	}
	v.m = promauto.With(cfg.Registerer).NewCounterVec(prometheus.CounterOpts{
		Namespace: "hotspot", Subsystem: "clusterauth", Name: "refused_total",
		Help: "Internal requests refused, by reason (missing, signature, skew, replay, too_large).",
	}, []string{"reason"})
	for _, r := range []string{reasonMissing, reasonSignature, reasonSkew, reasonReplay, reasonTooLarge} {
		v.m.WithLabelValues(r)
	}
	return v, nil
}

// Error is why Check refused a request.
type Error struct {
	Reason string // missing, signature, skew, replay or too_large
	Detail string
}

func (e *Error) Error() string { return "clusterauth: " + e.Reason + ": " + e.Detail }

// Check verifies one request's headers against its method, request target
// (path and query) and body digest, at now, and records its sequence. It
// returns nil or an *Error.
func (v *Verifier) Check(method, target string, bodySum []byte, h http.Header, now time.Time) error {
	source, ms, seqs, sig := h.Get(HeaderSource), h.Get(HeaderTime), h.Get(HeaderSeq), h.Get(HeaderSignature)
	if source == "" || ms == "" || seqs == "" || !strings.HasPrefix(sig, "v1=") {
		return &Error{reasonMissing, "no or incomplete signature headers"}
	}
	t, err1 := strconv.ParseInt(ms, 10, 64)
	seq, err2 := strconv.ParseUint(seqs, 10, 64)
	got, err3 := hex.DecodeString(sig[3:])
	if err1 != nil || err2 != nil || err3 != nil || len(got) != sha256.Size || len(source) > 256 {
		return &Error{reasonMissing, "malformed signature headers"}
	}
	// The signature first: nothing below may be driven by an unsigned
	// request (the replay table in particular).
	ok := false
	for _, secret := range v.secrets { // every one, so the time does not tell which matched
		want := message(hmac.New(sha256.New, secret), method, target, bodySum, t, source, seq)
		ok = hmac.Equal(got, want) || ok
	}
	if !ok {
		return &Error{reasonSignature, "signature does not match"}
	}
	// t >= 0 keeps both differences from overflowing.
	skew, ours := v.cfg.MaxSkew.Milliseconds(), now.UnixMilli()
	if t < 0 || ours-t > skew || t-ours > skew {
		return &Error{reasonSkew, fmt.Sprintf("time %d ms is more than %v from ours", t, v.cfg.MaxSkew)}
	}
	if !v.accept(source, seq, now) {
		return &Error{reasonReplay, fmt.Sprintf("sequence %d of %q seen before or too old", seq, source)}
	}
	return nil
}

// accept records seq for source and reports whether it is new.
func (v *Verifier) accept(source string, seq uint64, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.sources[source]
	if w == nil {
		if len(v.sources) >= v.cfg.MaxSources {
			v.forget(now)
		}
		if len(v.sources) >= v.cfg.MaxSources {
			// Every window is live: refusing is safe, the sender retries.
			return false
		}
		w = &window{highest: seq}
		w.seen[0] = 1
		w.last = now
		v.sources[source] = w
		return true
	}
	w.last = now
	switch {
	case seq > w.highest:
		shift := seq - w.highest
		w.shift(shift)
		w.highest = seq
		w.seen[0] |= 1
		return true
	case w.highest-seq >= replayWindow:
		return false
	default:
		i := w.highest - seq
		bit := uint64(1) << (i % 64)
		if w.seen[i/64]&bit != 0 {
			return false
		}
		w.seen[i/64] |= bit
		return true
	}
}

// shift moves the bitmap n places towards older sequences.
func (w *window) shift(n uint64) {
	if n >= replayWindow {
		clear(w.seen[:])
		return
	}
	words, bits := int(n/64), n%64
	for i := len(w.seen) - 1; i >= 0; i-- {
		var x uint64
		if j := i - words; j >= 0 {
			x = w.seen[j] << bits
			if bits > 0 && j-1 >= 0 {
				x |= w.seen[j-1] >> (64 - bits)
			}
		}
		w.seen[i] = x
	}
}

// forget drops the windows of senders not heard from for twice MaxSkew: any
// replay of their requests is now refused by its time. The caller holds v.mu.
func (v *Verifier) forget(now time.Time) {
	for s, w := range v.sources {
		if now.Sub(w.last) > 2*v.cfg.MaxSkew {
			delete(v.sources, s)
		}
	}
}

// Wrap returns a handler that passes a request on to h only when Check
// accepts it, with its body (read whole, at most MaxBody bytes) restored.
// Anything else gets 401 (413 for a body over MaxBody) and {"error": ...}.
func (v *Verifier) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, v.cfg.MaxBody))
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				v.refuse(w, r, &Error{reasonTooLarge, fmt.Sprintf("body over %d bytes", mbe.Limit)})
				return
			} else if err != nil {
				writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
				return
			}
			body = b
		}
		sum := sha256.Sum256(body)
		if err := v.Check(r.Method, r.URL.RequestURI(), sum[:], r.Header, v.now()); err != nil {
			var ae *Error
			errors.As(err, &ae)
			v.refuse(w, r, ae)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

func (v *Verifier) refuse(w http.ResponseWriter, r *http.Request, e *Error) {
	v.m.WithLabelValues(e.Reason).Inc()
	v.cfg.Logger.Debug("internal request refused", "reason", e.Reason, "detail", e.Detail,
		"remote", r.RemoteAddr, "path", r.URL.Path, "source", r.Header.Get(HeaderSource))
	code := http.StatusUnauthorized
	if e.Reason == reasonTooLarge {
		code = http.StatusRequestEntityTooLarge
	} else {
		w.Header().Set("WWW-Authenticate", `Hotspot-HMAC realm="cluster"`)
	}
	writeError(w, code, e.Error())
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}
