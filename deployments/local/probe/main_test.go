package main

import "testing"

// TestGroupPartition: the partitions Kafka gives these groups of 50, from
// Java's hashCode (jshell: Utils.abs("...".hashCode()) % 50).
func TestGroupPartition(t *testing.T) {
	for id, want := range map[string]int{
		"hello":                 22,
		"hotspot-stack-probe-7": 43,
		"detectors-of-bench":    30, // a negative hash
		"zzzzzzzzzz":            36, // a negative hash, wrapped more than once
		"polygenelubricants":    0,  // Integer.MIN_VALUE, which abs maps to 0
	} {
		if got := groupPartition(id, 50); got != want {
			t.Errorf("groupPartition(%q, 50) = %d, want %d", id, got, want)
		}
	}
	ids := groupsCovering(50)
	seen := map[int]bool{}
	for _, id := range ids {
		seen[groupPartition(id, 50)] = true
	}
	if len(ids) != 50 || len(seen) != 50 {
		t.Errorf("groupsCovering(50): %d IDs on %d partitions, want 50 on 50", len(ids), len(seen))
	}
}
