// Package httpjson writes the JSON answers of Hotspot's HTTP servers (the
// aggregators' internal API, hotspotd's public API, the example app), so
// that every one of them sets the same Content-Type and encodes the same
// way.
//
// Invariant: the status and the Content-Type header are written before any
// byte of the body, and a failure to write the body (the client went away)
// is ignored: there is no one left to tell.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write sends v as compact JSON with status: the form for answers that
// programs read.
func Write(w http.ResponseWriter, status int, v any) { write(w, status, v, "") }

// Indent sends v as JSON indented by two spaces per level, with status: the
// form for answers that people read with curl.
func Indent(w http.ResponseWriter, status int, v any) { write(w, status, v, "  ") }

// Error sends {"error": msg} with status, compact.
func Error(w http.ResponseWriter, status int, msg string) {
	Write(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

func write(w http.ResponseWriter, status int, v any, indent string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	_ = enc.Encode(v) // the client went away; nothing to do
}
