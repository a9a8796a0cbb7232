package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

// rulesAPI is the API over a real ZooKeeper, under a root of the test's own.
func rulesAPI(t *testing.T, token string) http.Handler {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{stacktest.ZK(t)}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	h, err := New(Config{
		HotSet:      func() *hotwatch.Snapshot { return nil },
		Aggregators: noAggregators{},
		Rules:       rulestore.New(s, "/"+stacktest.Name(t)), AdminToken: token,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(h http.Handler, method, url, auth, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, url, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestRulesRoutes walks every status of /v1/rules against ZooKeeper.
func TestRulesRoutes(t *testing.T) {
	h := rulesAPI(t, "s3cret")
	const tok = "Bearer s3cret"
	item := `{"match":"prefix","pattern":"item:","threshold":500,"window":"2s"}`
	tests := []struct {
		name, method, url, auth, body string
		wantStatus                    int
		wantBody                      string // a fragment of the answer
	}{
		{"nothing stored", "GET", "/v1/rules?app=shop", "", "", 200, `"version": 0,` + "\n" + `  "rules": []`},
		{"app is required", "GET", "/v1/rules", "", "", 400, "app is required"},
		{"no credentials", "PUT", "/v1/rules?app=shop", "", `{"version":0,"rules":[]}`, 401, "admin token"},
		{"wrong token", "PUT", "/v1/rules?app=shop", "Bearer nope", `{"version":0,"rules":[]}`, 401, "admin token"},
		{"delete needs the token", "DELETE", "/v1/rules?app=shop", "", "", 401, "admin token"},
		{"create", "PUT", "/v1/rules?app=shop", tok, `{"version":0,"rules":[` + item + `]}`, 200, `"version": 1`},
		{"read back", "GET", "/v1/rules?app=shop", "", "", 200, `"pattern": "item:"`},
		{"create again", "PUT", "/v1/rules?app=shop", tok, `{"rules":[]}`, 409, "version conflict"},
		{"replace with the app named", "PUT", "/v1/rules?app=shop", tok, `{"app":"shop","version":1,"rules":[` + item + `,{"match":"glob","pattern":"session:*","mode":"never"}]}`, 200, `"version": 2`},
		{"stale version", "PUT", "/v1/rules?app=shop", tok, `{"version":1,"rules":[]}`, 409, "version conflict"},
		{"another app's list", "PUT", "/v1/rules?app=shop", tok, `{"app":"feed","version":2,"rules":[]}`, 400, `"rule": -1`},
		// Each class of validation error, with the bad rule's index.
		{"bad JSON", "PUT", "/v1/rules?app=shop", tok, `{"version":2,`, 400, `"rule": -1`},
		{"unknown list field", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[],"extra":1}`, 400, `"rule": -1`},
		{"unknown encoding", "PUT", "/v1/rules?app=shop", tok, `{"v":9,"version":2,"rules":[]}`, 400, `unknown encoding version 9`},
		{"unknown rule field", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[` + item + `,{"match":"exact","pattern":"a","treshold":5}]}`, 400, `"rule": 1`},
		{"wrong type", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","threshold":"5"}]}`, 400, `"rule": 0`},
		{"missing match", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[` + item + `,` + item + `,{"pattern":"a"}]}`, 400, `rule 2: missing match`},
		{"unknown mode", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","mode":"hot"}]}`, 400, `unknown mode`},
		{"window not whole buckets", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","window":"150ms"}]}`, 400, `not a multiple of 100ms`},
		{"window too long", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","window":"2m"}]}`, 400, `out of range`},
		{"k without topk", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","k":5}]}`, 400, `k is for mode topk only`},
		{"topk without k", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"prefix","pattern":"feed:","mode":"topk"}]}`, 400, `k 0 out of range`},
		{"low above 1", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"a","low":1.5}]}`, 400, `low 1.5 out of range`},
		{"bad glob", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"glob","pattern":"a\\"}]}`, 400, `bad pattern`},
		{"too many rules", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[` + strings.Repeat(`{"match":"exact","pattern":"a"},`, rules.MaxRules) + `{"match":"exact","pattern":"a"}]}`, 400, `"rule": -1`},
		{"body too large", "PUT", "/v1/rules?app=shop", tok, `{"version":2,"rules":[{"match":"exact","pattern":"` + strings.Repeat("a", rules.MaxBytes) + `"}]}`, 413, `"rule": -1`},
		{"refused lists changed nothing", "GET", "/v1/rules?app=shop", "", "", 200, `"version": 2`},
		{"bad delete version", "DELETE", "/v1/rules?app=shop&version=x", tok, "", 400, "version must be"},
		{"stale delete", "DELETE", "/v1/rules?app=shop&version=1", tok, "", 409, "version conflict"},
		{"delete", "DELETE", "/v1/rules?app=shop&version=2", tok, "", 204, ""},
		{"back to the default", "GET", "/v1/rules?app=shop", "", "", 200, `"rules": []`},
		{"delete when none stored", "DELETE", "/v1/rules?app=shop", tok, "", 204, ""},
	}
	for _, tt := range tests {
		rec := do(h, tt.method, tt.url, tt.auth, tt.body)
		if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("%s: %s %s = %d %q, want %d containing %q", tt.name, tt.method, tt.url, rec.Code, trim(rec.Body.String()), tt.wantStatus, tt.wantBody)
		}
	}

	// Without a token configured, writes are refused; without a store, 501.
	if rec := do(rulesAPI(t, ""), "PUT", "/v1/rules?app=shop", tok, `{"rules":[]}`); rec.Code != 403 {
		t.Errorf("no --admin-token: PUT = %d, want 403", rec.Code)
	}
	noStore, _ := New(Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: noAggregators{}})
	if rec := do(noStore, "GET", "/v1/rules?app=shop", "", ""); rec.Code != 501 {
		t.Errorf("no store: GET = %d, want 501", rec.Code)
	}
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// TestRulesConcurrentWriters: PUTs racing with the same version: one 200,
// the others 409, and the stored list is the winner's.
func TestRulesConcurrentWriters(t *testing.T) {
	h := rulesAPI(t, "s3cret")
	if rec := do(h, "PUT", "/v1/rules?app=shop", "Bearer s3cret", `{"version":0,"rules":[]}`); rec.Code != 200 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	const writers = 8
	codes := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			body := fmt.Sprintf(`{"version":1,"rules":[{"match":"exact","pattern":"w%d"}]}`, i)
			codes[i] = do(h, "PUT", "/v1/rules?app=shop", "Bearer s3cret", body).Code
		})
	}
	wg.Wait()
	winner := -1
	for i, c := range codes {
		switch {
		case c == 200 && winner < 0:
			winner = i
		case c == 200:
			t.Errorf("writers %d and %d both won", winner, i)
		case c != 409:
			t.Errorf("writer %d: %d, want 200 or 409", i, c)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won: %v", codes)
	}
	var got struct {
		Version int64 `json:"version"`
		Rules   []struct {
			Pattern string `json:"pattern"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(do(h, "GET", "/v1/rules?app=shop", "", "").Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("w%d", winner); got.Version != 2 || len(got.Rules) != 1 || got.Rules[0].Pattern != want {
		t.Errorf("stored %+v, want version 2 with the winner's rule %s", got, want)
	}
}
