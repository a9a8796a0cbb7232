package detector

import (
	"context"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
)

// kafkaSource adapts a kafkaio.Group to Source.
type kafkaSource struct{ g *kafkaio.Group }

func (s kafkaSource) Next(ctx context.Context) (Generation, error) {
	gen, err := s.g.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return kafkaGeneration{gen}, nil
}

func (s kafkaSource) Close() error { return s.g.Close() }

type kafkaGeneration struct{ g *kafkaio.Generation }

func (g kafkaGeneration) Claims(from map[TopicPartition]int64) []Claim {
	as := g.g.Assignments()
	out := make([]Claim, len(as))
	for i, a := range as {
		if o, ok := from[TopicPartition(a.TopicPartition)]; ok && o > a.Offset {
			a.Offset = o // a.Offset may be kafka.FirstOffset or LastOffset, both negative
		}
		out[i] = kafkaClaim{g.g.Reader(a)}
	}
	return out
}

func (g kafkaGeneration) Start(fn func(ctx context.Context)) { g.g.Start(fn) }

func (g kafkaGeneration) Commit(ctx context.Context, offsets map[TopicPartition]int64) error {
	tps := make(map[kafkaio.TopicPartition]int64, len(offsets))
	for p, o := range offsets {
		tps[kafkaio.TopicPartition(p)] = o
	}
	return g.g.Commit(ctx, tps)
}

type kafkaClaim struct{ r *kafkaio.Reader }

func (c kafkaClaim) Topic() string  { return c.r.TopicPartition().Topic }
func (c kafkaClaim) Partition() int { return c.r.TopicPartition().Partition }
func (c kafkaClaim) Close() error   { return c.r.Close() }

func (c kafkaClaim) Fetch(ctx context.Context) (Record, error) {
	r, err := c.r.Fetch(ctx)
	return Record{Value: r.Value, Offset: r.Offset, HighWaterMark: r.HighWaterMark, Time: r.Time}, err
}
