package deployments

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard runs a real Prometheus (Debian's) scraping a hotspotd and an
// itemapp built from cmd/, under load against the shared stack, with
// alerts.yml loaded, and checks that every query of every panel of
// grafana/hotspot.json is valid and returns data, that every metric the
// alert rules use is exported, and that every rule evaluates without error.
func TestDashboard(t *testing.T) {
	promBin := needTool(t, "prometheus")
	if testing.Short() {
		t.Skip("runs hotspotd, itemapp and Prometheus under load")
	}
	kafka, zk, redis := stacktest.Kafka(t), stacktest.ZK(t), stacktest.Redis(t)
	var d dashboard
	readJSON(t, filepath.Join("grafana", "hotspot.json"), &d)
	if len(d.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	bin := binaries(t)
	name := stacktest.Name(t)
	hsAddr, appAddr, promAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	startProc(t, filepath.Join(bin, "hotspotd"), "--brokers", kafka, "--zk", zk, "--zk-root", "/"+name,
		"--topic", name, "--group", name, "--partitions", "2", "--threshold", "20", "--http-addr", hsAddr, "--id", name)
	waitOK(t, ctx, "http://"+hsAddr+"/readyz")
	startProc(t, filepath.Join(bin, "itemapp"), "--app", name, "--zk", zk, "--zk-root", "/"+name, "--redis", redis,
		"--redis-prefix", name+":", "--brokers", kafka, "--topic", name, "--http-addr", appAddr,
		"--source-latency", "1ms", "--items", "100000")
	waitOK(t, ctx, "http://"+appAddr+"/metrics")

	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: hotspotd
    static_configs: [{targets: [%q]}]
  - job_name: itemapp
    static_configs: [{targets: [%q]}]
`, rules, hsAddr, appAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, promBin, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", promAddr, "--storage.tsdb.retention.time", "1h")
	waitOK(t, ctx, "http://"+promAddr+"/-/ready")

	// Both targets scraped once before any load, so that the first
	// promotions show up as increases.
	prom := "http://" + promAddr
	waitFor(t, ctx, "a first scrape of hotspotd and itemapp", func() bool {
		v, ok := instant(t, prom, `count(up == 1)`)
		return ok && v == 2
	})

	// Load: four keys at about 60 reads/s each (threshold 20/s) and a
	// background of distinct keys, until the test ends.
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }()
	for g := range 4 {
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
				for _, id := range []int{g + 1, 1000 + g*20000 + i} {
					req, _ := http.NewRequestWithContext(loadCtx, "GET", "http://"+appAddr+"/item/"+strconv.Itoa(id), nil)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}
		})
	}

	// Until the pipeline has run end to end: keys hot, served from L1,
	// and a few rate windows scraped after that.
	waitFor(t, ctx, "hot keys served from the apps' L1", func() bool {
		v, ok := instant(t, prom, "sum(rate(hotspot_hotcache_l1_hits_total[5s])) > 0 and on() sum(hotspot_aggregator_hot_keys) >= 4")
		return ok && v > 0
	})
	time.Sleep(12 * time.Second)

	const rateInterval = "10s" // Grafana's $__rate_interval at a 1 s scrape
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			q := strings.ReplaceAll(tg.Expr, "$__rate_interval", rateInterval)
			n, err := rangeQuery(prom, q, start, time.Now())
			switch {
			case err != nil:
				t.Errorf("panel %q: %s: %v", p.Title, q, err)
			case n == 0:
				t.Errorf("panel %q: %s: no data", p.Title, q)
			default:
				t.Logf("panel %q: %d samples: %s", p.Title, n, q)
			}
		}
	}

	// Every metric the alert rules name is exported by the binaries.
	var names []string
	getJSON(t, prom+"/api/v1/label/__name__/values", &names)
	src, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\bhotspot_[a-z0-9_]+\b`).FindAllString(string(src), -1) {
		if !slices.Contains(names, m) {
			t.Errorf("alerts.yml uses %s, which neither hotspotd nor itemapp exports", m)
		}
	}

	// Every rule evaluates against real series without an error.
	var groups struct {
		Groups []struct {
			Rules []struct {
				Name, Health, LastError string
			}
		}
	}
	waitFor(t, ctx, "every alert rule evaluated", func() bool {
		getJSON(t, prom+"/api/v1/rules", &groups)
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false
				}
			}
		}
		return len(groups.Groups) > 0
	})
	n := 0
	for _, g := range groups.Groups {
		n += len(g.Rules)
	}
	t.Logf("%d rules healthy; test took %v", n, time.Since(start).Round(time.Second))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc starts a program for the test; it gets SIGINT at the end and
// must exit within 20 s. Its output is shown if the test fails.
func startProc(t *testing.T, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	var out strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 20 s of SIGINT", filepath.Base(path))
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("%s output (last 3000 bytes):\n%s", filepath.Base(path), tail(out.String(), 3000))
			mu.Unlock()
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitOK(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	waitFor(t, ctx, "200 from "+u, func() bool {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// apiResponse is Prometheus's HTTP API envelope.
type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

func callAPI(u string) (json.RawMessage, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	data, err := callAPI(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// instant runs an instant query and returns the first sample's value.
func instant(t *testing.T, prom, q string) (float64, bool) {
	t.Helper()
	data, err := callAPI(prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var r struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil || len(r.Result) == 0 {
		return 0, false
	}
	s, _ := r.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// rangeQuery runs q over [from, to] at a 1 s step and counts the samples
// that are numbers (not NaN).
func rangeQuery(prom, q string, from, to time.Time) (int, error) {
	v := url.Values{"query": {q}, "start": {strconv.FormatInt(from.Unix(), 10)},
		"end": {strconv.FormatInt(to.Unix(), 10)}, "step": {"1"}}
	data, err := callAPI(prom + "/api/v1/query_range?" + v.Encode())
	if err != nil {
		return 0, err
	}
	var r struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	if r.ResultType != "matrix" {
		return 0, fmt.Errorf("result type %s, want matrix", r.ResultType)
	}
	n := 0
	for _, s := range r.Result {
		for _, p := range s.Values {
			str, _ := p[1].(string)
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) {
				n++
			}
		}
	}
	return n, nil
}
