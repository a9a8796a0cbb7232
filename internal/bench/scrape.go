package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/promtext"
)

// Scrape scrapes every hotspotd's /metrics, each metric summed over its
// label sets; the result is indexed like cs.
func Scrape(ctx context.Context, cs []*hotspotapi.Client) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(cs))
	var errs []string
	for i, c := range cs {
		page, err := c.Metrics(ctx)
		if err == nil {
			out[i], err = promtext.Sum(page)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("metrics of %s: %v", c.Addr(), err))
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}
