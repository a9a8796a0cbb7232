// Package liblog routes the loggers of the libraries Hotspot uses into the
// binary's own *slog.Logger, at Debug, so that a binary writes no line it
// did not log itself (the SDK, hotcache, makes the same promise for its own
// logging): go-redis's process-wide logger, the standard library's log
// package (go-zookeeper's default logger writes there) and, through Printer,
// any library that takes a Printf logger, such as go-zookeeper's
// zk.WithLogger.
//
// Every binary calls Route once, first thing in main. The libraries' lines
// are kept at Debug because the code that gets their errors reports them
// once, where it handles them; --log-level debug shows them all.
package liblog
