package kafkaio

import (
	"errors"
	"testing"
)

func TestEnsureTopicNoBroker(t *testing.T) {
	_, err := EnsureTopic(t.Context(), []string{"127.0.0.1:1"}, "t", 8)
	if !errors.Is(err, ErrNoBroker) {
		t.Errorf("EnsureTopic with no broker: %v, want ErrNoBroker", err)
	}
}
