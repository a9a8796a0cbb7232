package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listedKeys returns the hot keys /v1/hotkeys lists, as "app/key".
func listedKeys(t *testing.T, addr string) map[string]bool {
	t.Helper()
	var out struct {
		Apps []struct {
			App     string `json:"app"`
			HotKeys []struct {
				Key string `json:"key"`
			} `json:"hotkeys"`
		} `json:"apps"`
	}
	getJSON(t, "http://"+addr+"/v1/hotkeys", &out)
	keys := map[string]bool{}
	for _, a := range out.Apps {
		for _, k := range a.HotKeys {
			keys[a.App+"/"+k.Key] = true
		}
	}
	return keys
}

// needTool returns the path of a Debian tool a test needs: under CI=true a
// missing one fails the test (make tools installs it), else it skips.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		p, err = exec.LookPath(filepath.Join("/usr/sbin", name))
	}
	if err != nil {
		msg := name + " not installed (`make tools` installs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// kcat starts `kcat -P` on topic: every line written to the returned
// writer becomes one record. It is closed, and kcat waited for, at cleanup.
func kcat(t *testing.T, brokers, topic string) io.Writer {
	t.Helper()
	cmd := exec.Command(needTool(t, "kcat"), "-P", "-b", brokers, "-t", topic, "-X", "linger.ms=5")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(in)
	t.Cleanup(func() {
		w.Flush()
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("kcat -P -t %s: %v\n%s", topic, err, stderr.String())
		}
	})
	return flushWriter{w}
}

// flushWriter flushes after every write, so that lines leave each tick.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// TestInputFormats: one hotspotd reads four topics through an input file,
// one of each format, each fed by Debian's kcat. In each, a key hammered at
// 3x the threshold is listed, keys at a tenth of it are not, nor is a key
// whose lines the input's where clause filters out; lines that yield no
// access are counted by topic and reason.
func TestInputFormats(t *testing.T) {
	c := newCluster(t, 2)
	topics := map[string]string{}
	for _, f := range []string{"combined", "json", "regex"} {
		topics[f] = c.topic + "." + f
	}
	input := fmt.Sprintf(`inputs:
  - topic: %s
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2'}
  - topic: %s
    format: json
    fields: {key: request.uri, app: service, bytes: size, op: request.method}
  - topic: %s
    format: regex
    pattern: '^(?P<ip>\S+) (?P<verb>[A-Z]+) (?P<uri>/\S*)$'
    key: "rx{uri}"
    app: rx
  - topic: %s
`, topics["combined"], topics["json"], topics["regex"], c.topic)
	file := filepath.Join(c.dir, "inputs.yaml")
	if err := os.WriteFile(file, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	c.extra = []string{"--input", file, "--partitions", "2"}
	p := c.start("i1")

	combined := func(path string, status int) string {
		return fmt.Sprintf(`192.0.2.7 - - [01/Dec/2026:10:00:00 +0000] "GET %s HTTP/1.1" %d 512 "-" "e2e"`, path, status)
	}
	type feed struct {
		w          io.Writer
		hot, cold  func(i int) string
		bad        string // a line that yields no access
		hotKey     string
		coldPrefix string
	}
	feeds := map[string]feed{
		"combined": {w: kcat(t, c.brokers, topics["combined"]),
			hot:  func(int) string { return combined("/item/42?ref=home", 200) },
			cold: func(i int) string { return combined(fmt.Sprintf("/item/%d", 100+i), 200) },
			bad:  "this is not a log line", hotKey: "web/item:42", coldPrefix: "web/item:1"},
		"json": {w: kcat(t, c.brokers, topics["json"]),
			hot: func(int) string {
				return `{"service":"svc","request":{"uri":"item:7","method":"GET"},"size":100,"other":[1,2]}`
			},
			cold: func(i int) string {
				return fmt.Sprintf(`{"service":"svc","request":{"uri":"cold:%d","method":"GET"}}`, i)
			},
			bad: `{"service":"svc","request":{}}`, hotKey: "svc/item:7", coldPrefix: "svc/cold:"},
		"regex": {w: kcat(t, c.brokers, topics["regex"]),
			hot:  func(int) string { return "198.51.100.1 GET /item/9" },
			cold: func(i int) string { return fmt.Sprintf("198.51.100.1 GET /cold/%d", i) },
			bad:  "GET", hotKey: "rx/rx/item/9", coldPrefix: "rx/rx/cold/"},
		"hotspot": {w: kcat(t, c.brokers, c.topic),
			hot:  func(int) string { return `{"app":"shop","key":"item:5"}` },
			cold: func(i int) string { return fmt.Sprintf(`{"app":"shop","key":"cold:%d"}`, i) },
			bad:  `{"app":"shop"}`, hotKey: "shop/item:5", coldPrefix: "shop/cold:"},
	}
	// Every 50 ms: 150 lines of the hot key (3000/s), 5 of each of 4 cold
	// keys (100/s each), one bad line, and on the combined topic 150 lines
	// of item 404 answered 404, which the where clause filters out.
	const tick = 50 * time.Millisecond
	stop := time.Now().Add(6 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for next := time.Now(); next.Before(stop); next = next.Add(tick) {
			time.Sleep(time.Until(next))
			for name, f := range feeds {
				var b strings.Builder
				for i := range 150 {
					b.WriteString(f.hot(i) + "\n")
					if name == "combined" {
						b.WriteString(combined("/item/404", 404) + "\n")
					}
				}
				for k := range 4 {
					for range 5 {
						b.WriteString(f.cold(k) + "\n")
					}
				}
				b.WriteString(f.bad + "\n")
				if _, err := io.WriteString(f.w, b.String()); err != nil {
					t.Errorf("kcat %s: %v", name, err)
					return
				}
			}
		}
	}()
	waitFor(t, 10*time.Second, "every format's hot key listed", func() bool {
		keys := listedKeys(t, p.addr)
		for _, f := range feeds {
			if !keys[f.hotKey] {
				return false
			}
		}
		return true
	})
	<-done
	keys := listedKeys(t, p.addr)
	for k := range keys {
		for _, f := range feeds {
			if strings.HasPrefix(k, f.coldPrefix) {
				t.Errorf("%s is listed; it was read at a tenth of the threshold", k)
			}
		}
		if k == "web/item:404" {
			t.Errorf("%s is listed; its lines are filtered out (status 404)", k)
		}
	}
	m := scrapeMetrics(t, p.addr)
	for _, want := range []string{
		`hotspot_input_dropped_total{reason="unmatched",topic="` + topics["combined"] + `"}`,
		`hotspot_input_dropped_total{reason="filtered",topic="` + topics["combined"] + `"}`,
		`hotspot_input_dropped_total{reason="missing_field",topic="` + topics["json"] + `"}`,
		`hotspot_input_dropped_total{reason="unmatched",topic="` + topics["regex"] + `"}`,
		`hotspot_events_invalid_total{reason="missing_key"}`,
	} {
		if m[want] < 1 {
			t.Errorf("%s = %v, want at least 1", want, m[want])
		}
	}
}

// scrapeMetrics returns the samples of /metrics by their name and labels
// as written, e.g. `hotspot_input_dropped_total{reason="filtered",topic="t"}`.
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		var v float64
		fmt.Sscan(line[i+1:], &v)
		out[line[:i]] = v
	}
	return out
}

// TestShipperNginx: nginx -> rsyslog -> Kafka -> hotspotd, all real
// (deployments/local/shipper.sh: Debian's nginx writes its combined access
// log, Debian's rsyslog ships each line with imfile and omkafka). A client
// hammers /item/42 at 2.5x the threshold: hotspotd, given an input file for
// the topic, lists item:42 from the access log and not item:7, read at a
// tenth of the threshold, nor anything from /healthz, which the input's
// extract pattern does not match.
func TestShipperNginx(t *testing.T) {
	c := newCluster(t, 2)
	needTool(t, "nginx")
	needTool(t, "rsyslogd")
	port := freeAddr(t)[len("127.0.0.1:"):]
	script, err := filepath.Abs("../../deployments/local/shipper.sh")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOTSPOT_SHIPPER_DIR="+filepath.Join(c.dir, "shipper"))
	shipper := func(args ...string) {
		cmd := exec.Command(script, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("shipper.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { shipper("down") })
	shipper("up", "--topic", c.topic, "--brokers", c.brokers, "--port", port)

	input := fmt.Sprintf(`inputs:
  - topic: %s
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2'}
`, c.topic)
	file := filepath.Join(c.dir, "inputs.yaml")
	if err := os.WriteFile(file, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	c.extra = []string{"--input", file}
	p := c.start("n1")

	// Requests on keep-alive connections, paced: 2500/s of /item/42, 100/s
	// of /item/7 and 50/s of /healthz, for 8 s at most.
	base := "http://127.0.0.1:" + port
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 5 * time.Second}
	get := func(path string) bool {
		resp, err := client.Get(base + path)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	type load struct {
		path string
		rate int
	}
	done := make(chan struct{})
	sent := make(chan int, 16)
	stop := time.Now().Add(8 * time.Second)
	for _, l := range []load{{"/item/42", 2500}, {"/item/7", 100}, {"/healthz", 50}} {
		workers := max(1, l.rate/250)
		for range workers {
			go func() {
				n := 0
				defer func() { sent <- n }()
				every := time.Second * time.Duration(workers) / time.Duration(l.rate)
				for next := time.Now(); next.Before(stop); next = next.Add(every) {
					select {
					case <-done:
						return
					default:
					}
					time.Sleep(time.Until(next))
					if get(l.path) {
						n++
					}
				}
			}()
		}
	}
	start := time.Now()
	waitFor(t, 8*time.Second, "item:42 listed from nginx's access log", func() bool {
		return listedKeys(t, p.addr)["web/item:42"]
	})
	t.Logf("item:42 listed %v after the requests began", time.Since(start).Round(time.Millisecond))
	for k := range listedKeys(t, p.addr) {
		if k != "web/item:42" {
			t.Errorf("%s is listed; only item:42 was read above the threshold", k)
		}
	}
	close(done)
	m := scrapeMetrics(t, p.addr)
	if k := `hotspot_input_dropped_total{reason="unmatched",topic="` + c.topic + `"}`; m[k] < 1 {
		t.Errorf("%s = %v: the /healthz lines were not counted as unmatched", k, m[k])
	}
}
