package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       float64
		wantErr    bool
	}{
		{"plain", "1234 (java) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 75 0 0 20 0 40 0 100 0 0", 3.25, false},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0", 0.03, false},
		{"too short", "7 (x) R 1 2 3", 0, true},
		{"no name", "garbage", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", 0, true},
	}
	for _, tc := range tests {
		got, err := parseProcStat(tc.line)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestProcCPUOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 200_000_000 { // about 0.1 s of CPU
		x += i ^ x
	}
	after, err := procCPU(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("CPU %v then %v (%v; x %d): want it to grow", before, after, err, x)
	}
}

func TestFindPipelineProcs(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	me := os.Getpid()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Only kafka.pid: ZooKeeper is left unmeasured, not an error.
	write("kafka.pid", strconv.Itoa(me)+"\n")
	procs, err := FindProcs(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 2 || procs[0].pid != me || procs[1].pid != 0 {
		t.Fatalf("got %+v, want kafka at pid %d and zookeeper unmeasured", procs, me)
	}
	// A flag wins over the pid file.
	if procs, err = FindProcs(dir, 0, me); err != nil || procs[1].pid != me || procs[1].from != "flag" {
		t.Fatalf("got %+v, %v; want zookeeper at pid %d from the flag", procs, err, me)
	}
	// A pid file that holds no pid, or names no process, is an error.
	write("zookeeper.pid", "not a pid")
	if _, err := FindProcs(dir, 0, 0); err == nil {
		t.Error("a pid file without a pid was accepted")
	}
	write("zookeeper.pid", "999999999")
	if _, err := FindProcs(dir, 0, 0); err == nil {
		t.Error("a pid of no process was accepted")
	}
	// No stack dir and no flags: nothing measured.
	if procs, err = FindProcs("", 0, 0); err != nil || procs[0].pid != 0 || procs[1].pid != 0 {
		t.Fatalf("got %+v, %v; want nothing measured", procs, err)
	}
}

func TestLagFigures(t *testing.T) {
	tests := []struct {
		lag                   []float64
		maxLag, first, second float64
	}{
		{nil, 0, 0, 0},
		{[]float64{5}, 5, 0, 5},
		{[]float64{1, 3, 10, 20}, 20, 2, 15},
		{[]float64{4, 0, 2}, 4, 4, 1},
	}
	for _, tc := range tests {
		m, f, s := lagFigures(tc.lag)
		if m != tc.maxLag || f != tc.first || s != tc.second {
			t.Errorf("lagFigures(%v) = %v, %v, %v; want %v, %v, %v", tc.lag, m, f, s, tc.maxLag, tc.first, tc.second)
		}
	}
}
