package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAddr returns the Redis address tests use.
func RedisAddr() string {
	if addr := os.Getenv("VOICEROOM_TEST_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// NewRedis returns a client and a key prefix of the test's own. Every key under
// the prefix is deleted when the test ends. The test is skipped under -short
// and fails if Redis cannot be reached.
func NewRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs Redis; skipped with -short")
	}
	client := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		tb.Fatalf("redis at %s: %v (deploy/services.sh starts it)", RedisAddr(), err)
	}
	prefix := "vrt:" + randomHex(6) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	})
	return client, prefix
}
