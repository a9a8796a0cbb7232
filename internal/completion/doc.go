// Package completion writes hotspot's shell completion scripts, for bash
// and zsh, from its commands and their flags (the command learns those from
// its own flag sets).
//
// Invariant: a flag that takes a value completes its value with the shell's
// default (file names), never with flags.
package completion
