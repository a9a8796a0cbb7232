package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The processes of the pipeline besides hotspotd (whose CPU comes from its
// own metrics): the Kafka broker and ZooKeeper, by pid. Their CPU time is
// read from /proc/<pid>/stat (utime + stime) before the workload and after
// the settle time, so it covers the same interval as hotspotd's figure.

// clockTicks is the unit of /proc/<pid>/stat's times. Linux reports them in
// USER_HZ, which is 100 on every architecture Go supports.
const clockTicks = 100

// Proc is one process of the pipeline that bench measures.
type Proc struct {
	name string // "kafka" or "zookeeper"
	pid  int    // 0: not found; its CPU is not measured
	from string // where the pid came from: a flag or a pid file
}

// FindProcs resolves the broker's and ZooKeeper's pids: a pid given
// by flag wins, else the pid file the local stack (deployments/local/
// stack.sh) keeps in stackDir. A pid that names no live process is an
// error; a missing pid file leaves that process unmeasured.
func FindProcs(stackDir string, brokerPid, zkPid int) ([]Proc, error) {
	var out []Proc
	for _, p := range []struct {
		name, file string
		pid        int
	}{{"kafka", "kafka.pid", brokerPid}, {"zookeeper", "zookeeper.pid", zkPid}} {
		proc := Proc{name: p.name, pid: p.pid, from: "flag"}
		if proc.pid == 0 && stackDir != "" {
			path := filepath.Join(stackDir, p.file)
			b, err := os.ReadFile(path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				out = append(out, Proc{name: p.name})
				continue
			case err != nil:
				return nil, fmt.Errorf("pid of %s: %w", p.name, err)
			}
			if proc.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || proc.pid <= 0 {
				return nil, fmt.Errorf("pid file %s holds %q, not a pid", path, strings.TrimSpace(string(b)))
			}
			proc.from = path
		}
		if proc.pid != 0 {
			if _, err := procCPU(proc.pid); err != nil {
				return nil, fmt.Errorf("%s (pid %d from %s): %w", p.name, proc.pid, proc.from, err)
			}
		}
		out = append(out, proc)
	}
	return out, nil
}

// procCPU returns the CPU seconds (user + system) that process pid has used.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("no such process: %w", err)
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses, so fields are counted after the last ')'.
func parseProcStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var sum uint64
	for _, field := range f[11:13] {
		n, err := strconv.ParseUint(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		sum += n
	}
	return float64(sum) / clockTicks, nil
}

// sampleCPU returns each process's CPU seconds, indexed like procs; an
// unmeasured or vanished process gives -1.
func sampleCPU(procs []Proc) []float64 {
	out := make([]float64, len(procs))
	for i, p := range procs {
		out[i] = -1
		if p.pid != 0 {
			if v, err := procCPU(p.pid); err == nil {
				out[i] = v
			}
		}
	}
	return out
}
