package stacktest

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

// EndOffset returns the offset the next record of partition 0 of topic will
// get: a test reads up to it to see everything written so far.
func EndOffset(t testing.TB, broker, topic string) int64 {
	t.Helper()
	conn, err := kafka.DialLeader(t.Context(), "tcp", broker, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	end, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return end
}
