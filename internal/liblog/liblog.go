package liblog

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// Route sends go-redis's and the log package's lines to l at Debug; a nil l
// discards them. It changes process-wide state: call it from main only.
func Route(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	redis.SetLogger(redisLogger{l})
	log.SetFlags(0)
	log.SetPrefix("")
	log.SetOutput(lineWriter{l})
}

// Printer is a Printf logger that sends each line to l at Debug, with a
// component attribute naming the library; zk.WithLogger takes one.
type Printer struct {
	l         *slog.Logger
	component string
}

// NewPrinter returns a Printer for the library component; a nil l discards.
func NewPrinter(l *slog.Logger, component string) Printer {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return Printer{l: l, component: component}
}

// Printf logs one line.
func (p Printer) Printf(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "component", p.component)
	}
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, args ...any) {
	if r.l.Enabled(ctx, slog.LevelDebug) {
		r.l.DebugContext(ctx, fmt.Sprintf(format, args...), "component", "go-redis")
	}
}

// lineWriter is the log package's output: one Debug record per line.
type lineWriter struct{ l *slog.Logger }

func (w lineWriter) Write(p []byte) (int, error) {
	if w.l.Enabled(context.Background(), slog.LevelDebug) {
		w.l.Debug(string(bytes.TrimRight(p, "\n")), "component", "log")
	}
	return len(p), nil
}
