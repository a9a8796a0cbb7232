package clusterauth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var secret = []byte("0123456789abcdef-cluster")

func newPair(t *testing.T) (*Signer, *Verifier) {
	t.Helper()
	s, err := NewSigner(secret, "det-1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(secret, Config{MaxSkew: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func signed(s *Signer, method, target string, body []byte) http.Header {
	src, ms, seq, sig := s.Headers(method, target, sum(body))
	h := http.Header{}
	h.Set(HeaderSource, src)
	h.Set(HeaderTime, ms)
	h.Set(HeaderSeq, seq)
	h.Set(HeaderSignature, sig)
	return h
}

func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func TestCheck(t *testing.T) {
	s, v := newPair(t)
	body := []byte("\xa6\x02partials")
	now := time.Now()
	other, _ := NewSigner([]byte("another-secret-of-16+"), "det-1")
	tests := []struct {
		name   string
		mutate func(h http.Header) (method, target string, body []byte, now time.Time)
		want   string
	}{
		{"valid", func(h http.Header) (string, string, []byte, time.Time) { return "POST", "/p", body, now }, ""},
		{"unsigned", func(h http.Header) (string, string, []byte, time.Time) {
			clear(h)
			return "POST", "/p", body, now
		}, reasonMissing},
		{"other method", func(h http.Header) (string, string, []byte, time.Time) { return "PUT", "/p", body, now }, reasonSignature},
		{"other path", func(h http.Header) (string, string, []byte, time.Time) { return "POST", "/q", body, now }, reasonSignature},
		{"other query", func(h http.Header) (string, string, []byte, time.Time) { return "POST", "/p?app=x", body, now }, reasonSignature},
		{"other body", func(h http.Header) (string, string, []byte, time.Time) { return "POST", "/p", []byte("x"), now }, reasonSignature},
		{"other time", func(h http.Header) (string, string, []byte, time.Time) {
			ms, _ := strconv.ParseInt(h.Get(HeaderTime), 10, 64)
			h.Set(HeaderTime, strconv.FormatInt(ms+1, 10))
			return "POST", "/p", body, now
		}, reasonSignature},
		{"other sequence", func(h http.Header) (string, string, []byte, time.Time) {
			h.Set(HeaderSeq, "1")
			return "POST", "/p", body, now
		}, reasonSignature},
		{"other source", func(h http.Header) (string, string, []byte, time.Time) {
			h.Set(HeaderSource, "det-2")
			return "POST", "/p", body, now
		}, reasonSignature},
		{"wrong secret", func(h http.Header) (string, string, []byte, time.Time) {
			for k, vs := range signed(other, "POST", "/p", body) {
				h[k] = vs
			}
			return "POST", "/p", body, now
		}, reasonSignature},
		{"truncated signature", func(h http.Header) (string, string, []byte, time.Time) {
			h.Set(HeaderSignature, h.Get(HeaderSignature)[:20])
			return "POST", "/p", body, now
		}, reasonMissing},
		{"too old", func(h http.Header) (string, string, []byte, time.Time) {
			return "POST", "/p", body, now.Add(6 * time.Second)
		}, reasonSkew},
		{"from the future", func(h http.Header) (string, string, []byte, time.Time) {
			return "POST", "/p", body, now.Add(-6 * time.Second)
		}, reasonSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := signed(s, "POST", "/p", body)
			m, target, b, at := tt.mutate(h)
			if got := reason(v.Check(m, target, sum(b), h, at)); got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReplayRefused(t *testing.T) {
	s, v := newPair(t)
	now := time.Now()
	h := signed(s, "POST", "/p", nil)
	if err := v.Check("POST", "/p", sum(nil), h, now); err != nil {
		t.Fatalf("first: %v", err)
	}
	if got := reason(v.Check("POST", "/p", sum(nil), h, now)); got != reasonReplay {
		t.Errorf("replay: got %q, want %q", got, reasonReplay)
	}
}

// Requests of one sender may arrive out of order: each is accepted once,
// within the window, and one older than the window is refused.
func TestOutOfOrderWithinWindow(t *testing.T) {
	s, v := newPair(t)
	now := time.Now()
	var hs []http.Header
	for range replayWindow + 10 {
		hs = append(hs, signed(s, "GET", "/t", nil))
	}
	order := []int{5, 3, 4, 0, 1, 2, 100, 64, 63, 65, replayWindow + 9, 10, 11}
	for _, i := range order {
		if err := v.Check("GET", "/t", sum(nil), hs[i], now); err != nil {
			t.Errorf("seq #%d: %v", i, err)
		}
	}
	for _, i := range []int{10, 11, 100, 64, replayWindow + 9} {
		if got := reason(v.Check("GET", "/t", sum(nil), hs[i], now)); got != reasonReplay {
			t.Errorf("seq #%d again: got %q, want replay", i, got)
		}
	}
	// #9 is exactly replayWindow below the highest (#replayWindow+9): too old.
	if got := reason(v.Check("GET", "/t", sum(nil), hs[9], now)); got != reasonReplay {
		t.Errorf("seq older than the window: got %q, want replay", got)
	}
	if err := v.Check("GET", "/t", sum(nil), hs[12], now); err != nil {
		t.Errorf("seq #12, inside the window, unseen: %v", err)
	}
}

// A restarted sender (new Signer, same id) is accepted: sequences start at
// the creation time in nanoseconds.
func TestRestartedSenderAccepted(t *testing.T) {
	s, v := newPair(t)
	now := time.Now()
	for range 3 {
		if err := v.Check("GET", "/t", sum(nil), signed(s, "GET", "/t", nil), now); err != nil {
			t.Fatal(err)
		}
	}
	s2, _ := NewSigner(secret, "det-1")
	if err := v.Check("GET", "/t", sum(nil), signed(s2, "GET", "/t", nil), now); err != nil {
		t.Errorf("restarted sender: %v", err)
	}
}

// TestRoundTrip runs a real client and server: signed requests pass with
// their bodies intact; unsigned, wrongly signed and replayed ones get 401
// and never reach the handler.
func TestRoundTrip(t *testing.T) {
	s, v := newPair(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(v.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	signedClient := &http.Client{Transport: s.Transport(nil)}

	post := func(c *http.Client, body string, hdr http.Header) int {
		req, _ := http.NewRequest("POST", srv.URL+"/internal/v1/partials", strings.NewReader(body))
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(signedClient, "batch-1", nil); code != 204 {
		t.Errorf("signed POST = %d, want 204", code)
	}
	resp, err := signedClient.Get(srv.URL + "/internal/v1/top?app=shop&n=3")
	if err != nil || resp.StatusCode != 204 {
		t.Errorf("signed GET = %v %v, want 204", resp, err)
	}
	if code := post(http.DefaultClient, "batch-2", nil); code != 401 {
		t.Errorf("unsigned POST = %d, want 401", code)
	}
	wrong, _ := NewSigner([]byte("not-the-cluster-secret"), "det-1")
	if code := post(&http.Client{Transport: wrong.Transport(nil)}, "batch-3", nil); code != 401 {
		t.Errorf("wrongly signed POST = %d, want 401", code)
	}
	// A replay: capture a signed request's headers and send them again.
	var captured http.Header
	capture := &http.Client{Transport: s.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		captured = r.Header.Clone()
		return http.DefaultTransport.RoundTrip(r)
	}))}
	if code := post(capture, "batch-4", nil); code != 204 {
		t.Errorf("signed POST = %d, want 204", code)
	}
	if code := post(http.DefaultClient, "batch-4", captured); code != 401 {
		t.Errorf("replayed POST = %d, want 401", code)
	}
	if code := post(http.DefaultClient, "batch-5", captured); code != 401 {
		t.Errorf("signature of another body = %d, want 401", code)
	}
	big := bytes.Repeat([]byte("x"), 1<<20+1)
	if code := post(signedClient, string(big), nil); code != 413 {
		t.Errorf("body over 1 MiB = %d, want 413", code)
	}
	want := []string{"POST /internal/v1/partials batch-1", "GET /internal/v1/top?app=shop&n=3 ", "POST /internal/v1/partials batch-4"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("handler saw %q, want %q", got, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// During a rotation a Verifier given the old secret as well accepts both;
// one without it refuses the old.
func TestRotation(t *testing.T) {
	oldS, _ := NewSigner([]byte("old-cluster-secret-0123"), "det-1")
	newS, _ := NewSigner([]byte("new-cluster-secret-0123"), "det-2")
	both, err := NewVerifier([]byte("new-cluster-secret-0123"), Config{}, []byte("old-cluster-secret-0123"))
	if err != nil {
		t.Fatal(err)
	}
	only, _ := NewVerifier([]byte("new-cluster-secret-0123"), Config{})
	now := time.Now()
	for _, c := range []struct {
		name string
		s    *Signer
		v    *Verifier
		want string
	}{
		{"new secret, both accepted", newS, both, ""},
		{"old secret, both accepted", oldS, both, ""},
		{"new secret, new only", newS, only, ""},
		{"old secret, new only", oldS, only, reasonSignature},
	} {
		if got := reason(c.v.Check("GET", "/t", sum(nil), signed(c.s, "GET", "/t", nil), now)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := NewVerifier([]byte("new-cluster-secret-0123"), Config{}, []byte("short")); !errors.Is(err, ErrShortSecret) {
		t.Errorf("short older secret: %v, want ErrShortSecret", err)
	}
}

func TestShortSecret(t *testing.T) {
	if _, err := NewSigner([]byte("short"), "x"); !errors.Is(err, ErrShortSecret) {
		t.Errorf("NewSigner(short) = %v, want ErrShortSecret", err)
	}
	if _, err := NewVerifier([]byte("short"), Config{}); !errors.Is(err, ErrShortSecret) {
		t.Errorf("NewVerifier(short) = %v, want ErrShortSecret", err)
	}
}

// FuzzCheck: whatever headers and request arrive, Check never panics, and
// it accepts only the exact request that was signed, once.
func FuzzCheck(f *testing.F) {
	f.Add("POST", "/p", []byte("body"), "det-1", "123", "456", "v1=00", int64(0))
	f.Add("GET", "/t?app=a", []byte(nil), "", "", "", "", int64(1))
	f.Fuzz(func(t *testing.T, method, target string, body []byte, source, ms, seq, sig string, flip int64) {
		s, v := newPair(t)
		now := time.Now()
		// Arbitrary headers never pass.
		h := http.Header{}
		h.Set(HeaderSource, source)
		h.Set(HeaderTime, ms)
		h.Set(HeaderSeq, seq)
		h.Set(HeaderSignature, sig)
		if err := v.Check(method, target, sum(body), h, now); err == nil {
			t.Fatalf("forged headers %v accepted", h)
		}
		// A real signature passes once, and not for any other request.
		good := signed(s, method, target, body)
		m0, t0, b0 := method, target, append([]byte(nil), body...)
		mutated := good.Clone()
		flip = (flip%4 + 4) % 4
		switch flip {
		case 0:
			method += "X"
		case 1:
			target += "/"
		case 2:
			body = append(body, byte(flip))
		case 3:
			mutated.Set(HeaderSeq, mutated.Get(HeaderSeq)+"0")
		}
		if err := v.Check(method, target, sum(body), mutated, now); err == nil {
			t.Fatalf("mutated request (flip %d) accepted", flip)
		}
		if err := v.Check(m0, t0, sum(b0), good, now); err != nil {
			t.Fatalf("signed request refused: %v", err)
		}
		if err := v.Check(m0, t0, sum(b0), good, now); err == nil {
			t.Fatalf("signed request accepted twice")
		}
	})
}

// BenchmarkSignAndCheck: the cost the signature adds to one internal
// request of bodySize bytes (hash on both sides, HMAC, replay window).
func BenchmarkSignAndCheck(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			s, _ := NewSigner(secret, "det-1")
			v, _ := NewVerifier(secret, Config{})
			body := bytes.Repeat([]byte("k"), size)
			now := time.Now()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				h := signed(s, "POST", "/internal/v1/partials", body)
				if err := v.Check("POST", "/internal/v1/partials", sum(body), h, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
