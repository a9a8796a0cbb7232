package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// Clients in other languages, nobody here wrote: Jedis (Java) and ioredis
// (Node.js). Each is a small program of ours under testdata that runs the
// client's usual patterns and checks the answers itself (exit code 0 and a
// line per check); the test runs it against Redis directly and through the
// proxy, so a failure through the proxy alone is the proxy's.

// extClient is a client program in another language.
type extClient struct {
	name  string // the client library, for messages
	setup string // the script under deployments/local that installs it; it prints what command needs
	// command returns the program's command line and extra environment,
	// given what setup printed.
	command func(setupOut string) (argv, env []string)
}

var jedisClient = extClient{
	name:  "Jedis",
	setup: "jedisenv.sh",
	command: func(classpath string) ([]string, []string) {
		return []string{"java", "-XX:TieredStopAtLevel=1", "-cp", classpath, "JedisCheck"}, nil
	},
}

var ioredisClient = extClient{
	name:  "ioredis",
	setup: "ioredisenv.sh",
	command: func(nodeModules string) ([]string, []string) {
		return []string{"node", "testdata/ioredis/check.js"}, []string{"NODE_PATH=" + nodeModules}
	},
}

// TestClientJedis runs Jedis 5 (Maven Central) through the proxy: pooled
// GET/SET from 8 threads, a pipeline with an error inside, MULTI/EXEC with
// WATCH, DISCARD and EXECABORT, Pub/Sub with patterns, Lua EVAL/EVALSHA, and
// a read timeout while a private Redis is frozen and reconnects after it was
// killed and started again.
func TestClientJedis(t *testing.T) { testExtClient(t, jedisClient) }

// TestClientIoredis runs ioredis 5 (npm) through the proxy: the same
// patterns as TestClientJedis, with ioredis' auto-pipelining, MULTI as one
// pipeline and as separate commands, and defineCommand's EVALSHA-then-EVAL.
func TestClientIoredis(t *testing.T) { testExtClient(t, ioredisClient) }

func testExtClient(t *testing.T, c extClient) {
	if testing.Short() {
		t.Skipf("%s: -short skips it (it installs the client and starts another runtime)", c.name)
	}
	redisAddr := stacktest.Redis(t)
	argv, env := c.prepare(t)
	prefix := stacktest.Name(t)
	cleanKeys(t, redisAddr, prefix)

	// Each run directly first: when it fails there, the program or the
	// client is at fault (or Redis), not the proxy.
	var directOK bool
	t.Run("direct", func(t *testing.T) {
		c.run(t, argv, env, "patterns", redisAddr, prefix+":d", nil, "directly against Redis", "the program, the client or Redis")
		directOK = !t.Failed()
	})
	for _, mode := range []string{UpstreamDedicated, UpstreamShared} {
		t.Run("proxy-"+mode, func(t *testing.T) {
			tp := startProxy(t, redisAddr, func(c *Config) { c.Upstream = mode })
			where, blame := through(directOK)
			c.run(t, argv, env, "patterns", tp.addr, prefix+":p-"+mode, nil, where, blame)
		})
	}
	var restartOK bool
	t.Run("restart-direct", func(t *testing.T) {
		rs := stacktest.StartRedisServer(t)
		c.run(t, argv, env, "restart", rs.Addr, prefix, rs, "directly against a private Redis", "the program, the client or Redis")
		restartOK = !t.Failed()
	})
	for _, mode := range []string{UpstreamDedicated, UpstreamShared} {
		t.Run("restart-proxy-"+mode, func(t *testing.T) {
			rs := stacktest.StartRedisServer(t)
			tp := startProxy(t, rs.Addr, func(c *Config) { c.Upstream = mode })
			where, blame := through(restartOK)
			c.run(t, argv, env, "restart", tp.addr, prefix, rs, where, blame)
			if r := string(dialRaw(t, tp.addr).do("PING")); r != "+PONG\r\n" {
				t.Fatalf("PING through the proxy after the restart: %q", r)
			}
		})
	}
}

// through names a run through the proxy and, for its failure, whom it
// blames.
func through(directOK bool) (where, blame string) {
	if directOK {
		return "through the proxy", "it passed directly: a proxy defect"
	}
	return "through the proxy", "it failed directly too: the program, the client or Redis"
}

// prepare installs the client (the setup script, bounded by 5 minutes for
// the first download) and returns the program's command. Without the tools
// or the registry the test is skipped, or fails under CI=true.
func (c extClient) prepare(t *testing.T) (argv, env []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	setup := exec.CommandContext(ctx, filepath.Join(root, "deployments/local", c.setup))
	setup.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	setup.Stderr = &stderr
	start := time.Now()
	out, err := setup.Output()
	if err != nil {
		msg := fmt.Sprintf("%s (deployments/local/%s): %v\n%s", c.name, c.setup, err, stderr.Bytes())
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("%s installed in %v", c.name, d.Round(time.Second))
	}
	argv, env = c.command(strings.TrimSpace(string(out)))
	if _, err := exec.LookPath(argv[0]); err != nil {
		msg := fmt.Sprintf("%s: %v", c.name, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return argv, env
}

// run runs the program in mode ("patterns" or "restart") against addr,
// bounded by 2 minutes, and fails the test with its report (where: the
// run, in words; blame: whose fault a failure is) unless it passed every
// check. In restart mode it acts on rs when
// the program asks ("@pause", "@resume", "@stop", "@start") and answers
// "done ACTION" once done.
func (c extClient) run(t *testing.T, argv, env []string, mode, addr, prefix string, rs *stacktest.RedisServer, where, blame string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	host, port := hostPort(addr)
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], mode, host, port, prefix)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var report strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintf(&report, "%6.2fs %s\n", time.Since(start).Seconds(), line)
		action, ok := strings.CutPrefix(line, "@")
		if !ok {
			continue
		}
		switch {
		case rs == nil:
			t.Errorf("%s asked to %s Redis in %s mode", c.name, action, mode)
		case action == "pause":
			rs.Pause()
		case action == "resume":
			rs.Resume()
		case action == "stop":
			rs.Stop()
		case action == "start":
			rs.Start()
		default:
			t.Errorf("%s asked for %q", c.name, line)
		}
		fmt.Fprintf(stdin, "done %s\n", action)
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	stdin.Close()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", time.Since(start).Round(time.Second), err)
	}
	text := report.String()
	if stderr.Len() > 0 {
		text += "stderr:\n" + stderr.String()
	}
	if err != nil || !strings.Contains(text, " PASS\n") {
		t.Fatalf("%s %s, %s, failed (%s): %v\n%s", c.name, mode, where, blame, err, text)
	}
	t.Logf("%s %s, %s:\n%s", c.name, mode, where, text)
}
