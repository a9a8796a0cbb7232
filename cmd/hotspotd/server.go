package main

import (
	"net/http"
	"time"
)

// HTTP server bounds: a client gets ReadHeaderTimeout to send its headers and
// ReadTimeout for the whole request (a 1 MiB partials body on a LAN takes
// milliseconds); WriteTimeout bounds an answer, which must cover the API's
// fan-out to every aggregator (2s each, in parallel) and a CPU profile of up
// to 30 s when pprof is on; IdleTimeout closes kept-alive connections that
// carry nothing.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 40 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}
