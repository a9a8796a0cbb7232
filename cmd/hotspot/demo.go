package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hotspot-dev/hotspot/internal/demo"
)

const demoHelp = `
The main job in one command (make demo runs it after starting the stack and
building the binaries). It starts two hotspotd processes and two instances of
the example app (itemapp) against the local stack, then drives them:

  - Zipf background traffic: reads of 10,000 items spread over both apps,
    plus access events of other instances straight to Kafka;
  - partway through, a flash crowd on a few items, thousands of reads per
    second each, through the apps.

Every second it prints which keys are hot, the apps' L1 hit ratio and the
reads per second that reach Redis and the source; the live page is at
http://<first hotspotd>/. At the end (after --duration, or Ctrl-C) it prints a
summary, with the detection delay of each flash key and the share of the
flash keys' reads that the apps served from memory (served_l1, as the
cluster reported it), and stops everything it started.`

func runDemo(ctx context.Context, args []string) error {
	return demoCmd(ctx, args, os.Getenv, os.Stdout)
}

func demoCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cfg, err := parseDemoFlags(args, getenv, out)
	if err != nil {
		return err
	}
	return demo.Run(ctx, cfg, out)
}

func parseDemoFlags(args []string, getenv func(string) string, out io.Writer) (demo.Config, error) {
	fs := newFlags("demo", demoHelp)
	brokers := fs.String("brokers", "127.0.0.1:19092", "Kafka bootstrap brokers of the local stack")
	zkServers := fs.String("zk", "127.0.0.1:12181", "ZooKeeper of the local stack")
	redisAddr := fs.String("redis", "127.0.0.1:16379", "Redis of the local stack")
	duration := fs.Duration("duration", time.Minute, "how long to run")
	flashAt := fs.Duration("flash-at", 20*time.Second, "when the flash crowd starts")
	background := fs.Float64("background", 800, "background reads/s through the apps (Zipf over 10,000 items)")
	kafkaBackground := fs.Float64("kafka-background", 20000, "access events/s of other instances, straight to Kafka (Zipf s=0.8 over 1M items)")
	binDir := fs.String("bin", "", "folder of the hotspotd and itemapp binaries (default: beside this one)")
	basePort := fs.Int("port", 7070, "first HTTP port: hotspotd on PORT and PORT+1, the apps on PORT+10 and PORT+11")
	fs.SetOutput(out)
	if err := parseFlags(fs, args, getenv); err != nil {
		return demo.Config{}, err
	}
	cfg := demo.Config{Brokers: *brokers, ZooKeeper: *zkServers, Redis: *redisAddr, Duration: *duration, FlashAt: *flashAt,
		Background: *background, KafkaRate: *kafkaBackground, BinDir: *binDir, BasePort: *basePort}
	if cfg.BinDir == "" {
		self, err := os.Executable()
		if err != nil {
			return cfg, err
		}
		cfg.BinDir = filepath.Dir(self)
	}
	for _, b := range []string{"hotspotd", "itemapp"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return cfg, fmt.Errorf("%s is not in %s: run `make build` (or pass --bin)", b, cfg.BinDir)
		}
	}
	return cfg, nil
}
