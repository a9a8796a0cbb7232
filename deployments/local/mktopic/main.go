// Command mktopic creates a topic for deployments/local/shipper.sh: with
// the broker's append time as record timestamps (omkafka stamps whole
// seconds; docs/ingest.md) and the brokers' default replication factor,
// unless it exists, then waits until every partition is served and prints
// the partition count.
//
//	mktopic BROKERS TOPIC PARTITIONS
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mktopic BROKERS TOPIC PARTITIONS")
		os.Exit(2)
	}
	partitions, err := strconv.Atoi(os.Args[3])
	if err != nil || partitions < 1 {
		fmt.Fprintln(os.Stderr, "mktopic: PARTITIONS must be a number >= 1")
		os.Exit(2)
	}
	n, err := kafkaio.EnsureTopicSpec(context.Background(), nil, envflag.SplitList(os.Args[1]), os.Args[2], kafkaio.TopicSpec{
		Partitions: partitions, Config: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mktopic: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(n)
}
