package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// zkSessions returns how many client sessions a ZooKeeper server serves
// (the lines of its cons command that name a session), or -1 when it does
// not answer.
func zkSessions(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return -1
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("cons")); err != nil {
		return -1
	}
	n := 0
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "sid=") {
			n++
		}
	}
	return n
}

// appSample is one read of an app's hot set (hotcache.Client.Hot).
type appSample struct {
	at   time.Time
	keys []string
}

// TestClusterObservers: an app whose SDK knows only the two ZooKeeper
// observers (stack.sh up --cluster; HOTSPOT_ZK_OBSERVERS) follows the hot
// set that three hotspotd, on the voting ensemble, publish: it lists the hot
// keys. The observer serving its session is then killed (SIGKILL) under
// load: the SDK moves its session to the other observer, its hot set is
// never empty and never loses a key hot throughout meanwhile, and a key that
// turns hot after the kill reaches it within clusterDetectBound of turning
// hot in every hotspotd's view. The observer is started again at the end.
func TestClusterObservers(t *testing.T) {
	c := onClusterStack(t, 8)
	observers := strings.Split(os.Getenv("HOTSPOT_ZK_OBSERVERS"), ",")
	if len(observers) < 2 || observers[0] == "" {
		t.Fatal("HOTSPOT_ZK_OBSERVERS names no two observers: `eval \"$(deployments/local/stack.sh env --cluster)\"`")
	}
	for _, a := range observers {
		if m := zkMode(a); m != "observer" {
			t.Fatalf("ZooKeeper at %s says it is %q, want observer", a, m)
		}
	}
	r := newFaultRun(t, c)
	app, err := hotcache.New(t.Context(), hotcache.WithApp("shop"), hotcache.WithInstanceID("observer-app"),
		hotcache.WithZooKeeper(observers, c.root))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	var (
		mu      sync.Mutex
		samples []appSample
	)
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				var keys []string
				for _, k := range app.Hot() {
					keys = append(keys, k.Key)
				}
				mu.Lock()
				samples = append(samples, appSample{now, keys})
				mu.Unlock()
			}
		}
	}()
	defer func() { cancel(); <-sampled }()
	listed := func(key string, from time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range samples {
			if s.at.After(from) && slices.Contains(s.keys, key) {
				return s.at, true
			}
		}
		return time.Time{}, false
	}
	const hotAfter = 3 * time.Second // after:2x turns hot this long after the kill
	r.runLoad(clusterWorkload(c, faultAt+25*time.Second, faultAt+40*time.Second, faultAt+hotAfter))
	waitFor(t, faultAt, "fixed:3x in the app's hot set, read from an observer", func() bool {
		_, ok := listed("fixed:3x", r.start)
		return ok
	})
	at, _ := listed("fixed:3x", r.start)
	t.Logf("the app on the observers listed fixed:3x at +%v", at.Sub(r.start).Round(time.Millisecond))
	time.Sleep(time.Until(r.start.Add(faultAt)))

	victim := 0
	for i, a := range observers {
		if zkSessions(a) > 0 {
			victim = i + 1
			break
		}
	}
	if victim == 0 {
		t.Fatalf("no observer serves a session (cons), the app's included")
	}
	other := observers[2-victim] // the two observers: 1 <-> 2
	name := "observer" + strconv.Itoa(victim)
	t.Cleanup(func() {
		member(t, "start", name)
		waitFor(t, 60*time.Second, name+" serving again", func() bool { return zkMode(observers[victim-1]) == "observer" })
	})
	killed := time.Now()
	member(t, "kill", name)
	t.Logf("killed %s, serving the app's session, at +%v", name, killed.Sub(r.start).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "the app's session on the other observer", func() bool { return zkSessions(other) > 0 })
	moved := time.Since(killed)
	waitFor(t, recoveryBound, "after:2x in every view", func() bool { return len(r.listedBy("after:2x", killed)) == 3 })
	views := r.listedBy("after:2x", killed)
	waitFor(t, recoveryBound, "after:2x in the app's hot set", func() bool {
		_, ok := listed("after:2x", killed)
		return ok
	})
	appAt, _ := listed("after:2x", killed)
	var viewsAt time.Duration
	for _, d := range views {
		viewsAt = max(viewsAt, d)
	}
	t.Logf("the app's session on the other observer within %v of the kill; after:2x, hot %v after it, in every view after %v and in the app's hot set after %v",
		moved.Round(time.Millisecond), hotAfter, viewsAt.Round(time.Millisecond), appAt.Sub(killed).Round(time.Millisecond))
	if d := appAt.Sub(killed.Add(viewsAt)); d > clusterDetectBound {
		t.Errorf("the app listed after:2x %v after every hotspotd's view did, want within %v", d.Round(time.Millisecond), clusterDetectBound)
	}
	// From the kill until after:2x reached the app: never empty, never
	// without a key hot throughout.
	mu.Lock()
	var n, empty, lacking int
	var first time.Time
	for _, s := range samples {
		if s.at.Before(killed) || s.at.After(appAt) {
			continue
		}
		n++
		bad := false
		if len(s.keys) == 0 {
			empty++
			bad = true
		}
		for _, key := range []string{"fixed:2x", "fixed:3x"} {
			if !slices.Contains(s.keys, key) {
				lacking++
				bad = true
			}
		}
		if bad && first.IsZero() {
			first = s.at
		}
	}
	mu.Unlock()
	t.Logf("the app's hot set from the kill until after:2x reached it: %d samples, %d empty, %d lacking fixed:2x or fixed:3x", n, empty, lacking)
	if n == 0 {
		t.Error("no sample of the app's hot set between the kill and after:2x reaching it")
	}
	if empty > 0 || lacking > 0 {
		t.Errorf("the app's hot set, while its observer died: %d samples empty, %d lacking a key hot throughout, from +%v", empty, lacking, first.Sub(r.start).Round(time.Millisecond))
	}
	r.faults = append(r.faults, [2]time.Time{killed, killed.Add(clusterDetectTarget)})
	r.finish()
}
