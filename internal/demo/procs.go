package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// procSet starts child processes and stops them all with SIGTERM.
type procSet struct {
	logDir string
	procs  []*exec.Cmd
	names  []string
	done   []chan error
}

func (p *procSet) start(ctx context.Context, bin, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(p.logDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	p.procs, p.names, p.done = append(p.procs, cmd), append(p.names, name), append(p.done, done)
	return nil
}

// stopAll stops the processes in reverse order of start, apps first.
func (p *procSet) stopAll(out io.Writer) {
	for i := len(p.procs) - 1; i >= 0; i-- {
		cmd := p.procs[i]
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done[i]:
			if err != nil {
				fmt.Fprintf(out, "%s exited: %v (log: %s)\n", p.names[i], err, filepath.Join(p.logDir, p.names[i]+".log"))
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			fmt.Fprintf(out, "%s did not stop within 30s of SIGTERM; killed\n", p.names[i])
		}
	}
	fmt.Fprintf(out, "stopped %d processes\n", len(p.procs))
}

func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}
