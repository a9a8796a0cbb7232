package hotcache_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/hotspot-dev/hotspot/hotcache"
)

// catalog is a source of truth: a Loader that is also a Writer.
type catalog struct {
	mu    sync.Mutex
	items map[string]string
}

func (c *catalog) Load(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.items[key]
	if !ok {
		return nil, hotcache.ErrNotFound
	}
	return []byte(v), nil
}

func (c *catalog) Write(ctx context.Context, key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[key] = string(value)
	return nil
}

func (c *catalog) Delete(ctx context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, key)
	return nil
}

// A Client with only a Loader: no ZooKeeper (nothing is ever hot), no Redis,
// no reporting. Useful in unit tests of the app.
func Example() {
	ctx := context.Background()
	db := &catalog{items: map[string]string{"item:42": "teapot"}}
	c, err := hotcache.New(ctx, hotcache.WithApp("shop"), hotcache.WithLoader(db))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	v, err := c.Get(ctx, "item:42")
	fmt.Println(string(v), err)

	_, err = c.Get(ctx, "item:7")
	fmt.Println(errors.Is(err, hotcache.ErrNotFound))

	if err := c.Set(ctx, "item:42", []byte("kettle")); err != nil {
		log.Fatal(err)
	}
	v, _ = c.Get(ctx, "item:42")
	fmt.Println(string(v), c.IsHot("item:42"))
	// Output:
	// teapot <nil>
	// true
	// kettle false
}

// A Client as an app instance runs it: the hot set from ZooKeeper, Redis as
// the shared cache (sharded over two servers by Hotspot's ring), accesses
// reported to Kafka, metrics exported.
func ExampleNew() {
	ctx := context.Background()
	db := &catalog{items: map[string]string{}}
	c, err := hotcache.New(ctx,
		hotcache.WithApp("shop"),
		hotcache.WithZooKeeper([]string{"127.0.0.1:2181"}, "/hotspot"),
		hotcache.WithRedis("10.0.0.1:6379", "10.0.0.2:6379"),
		hotcache.WithKafka([]string{"127.0.0.1:9092"}, "hotspot.access"),
		hotcache.WithLoader(db),
		hotcache.WithHotReadLimit(400), hotcache.WithLoaderLimit(2000),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, k := range c.Hot() {
		fmt.Println(k.Key, k.Rate, k.Loaded)
	}
}

// Errors tell a caller what to do: ErrNotFound is an answer, ErrThrottled and
// ErrUnavailable mean "degrade" (serve a default, retry later), not "retry now".
func ExampleClient_Get() {
	ctx := context.Background()
	c, err := hotcache.New(ctx, hotcache.WithApp("shop"),
		hotcache.WithLoader(hotcache.LoaderFunc(func(ctx context.Context, key string) ([]byte, error) {
			return nil, fmt.Errorf("%s: %w", key, hotcache.ErrNotFound)
		})))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(ctx, "item:1")
	switch {
	case errors.Is(err, hotcache.ErrNotFound):
		fmt.Println("404")
	case errors.Is(err, hotcache.ErrThrottled), errors.Is(err, hotcache.ErrUnavailable):
		fmt.Println("503")
	case err != nil:
		fmt.Println("500")
	}
	// Output: 404
}

// A limit can answer instead of failing: seed 003 serves a blank page when
// its back-source bucket is empty. Lookup tells the app which answer it got.
func ExampleWithFallback() {
	ctx := context.Background()
	c, err := hotcache.New(ctx, hotcache.WithApp("shop"),
		hotcache.WithLoader(hotcache.LoaderFunc(func(ctx context.Context, key string) ([]byte, error) {
			return []byte("page of " + key), nil
		})),
		hotcache.WithLoaderLimit(0.01), // one Loader call per 100 s, to show the fallback
		hotcache.WithFallback(func(ctx context.Context, key string, err error) ([]byte, error) {
			return []byte("blank page"), nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, key := range []string{"item:1", "item:2"} {
		v, served, err := c.Lookup(ctx, key)
		fmt.Println(string(v), served, err)
	}
	// Output:
	// page of item:1 fresh <nil>
	// blank page fallback <nil>
}
