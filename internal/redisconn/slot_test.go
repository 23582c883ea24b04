package redisconn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/redisconn"
	"voiceroom/internal/testenv"
)

// TestSlotKnownValues: the slots Redis's cluster specification gives.
func TestSlotKnownValues(t *testing.T) {
	tests := []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3 % redisconn.SlotCount}, // the CRC16 check value
		{"foo", 12182},
		{"{user1000}.following", redisconn.Slot("user1000")},
		{"foo{}{bar}", redisconn.Slot("foo{}{bar}")}, // empty first tag: the whole key
		{"foo{{bar}}zap", redisconn.Slot("{bar")},
		{"foo{bar}{zap}", redisconn.Slot("bar")},
	}
	for _, tt := range tests {
		if got := redisconn.Slot(tt.key); got != tt.slot {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	if redisconn.Slot("foo{}{bar}") == redisconn.Slot("bar") {
		t.Error("an empty first tag must not fall through to the second")
	}
}

// TestSlotMatchesRedis: Slot agrees with the server's CLUSTER KEYSLOT
// (which a server answers in cluster mode only: the test cluster's).
func TestSlotMatchesRedis(t *testing.T) {
	rdb := testenv.NewRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 200 {
		key := fmt.Sprintf("room:card:{app%d:app%d_%d}", i%7, i%7, i)
		if i%3 == 0 {
			key = fmt.Sprintf("k%d-%d", i, i*i)
		}
		want, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
		}
		if got := redisconn.Slot(key); int64(got) != want {
			t.Fatalf("Slot(%q) = %d, Redis says %d", key, got, want)
		}
	}
}

// TestMGetAcrossSlots: MGet reads keys of many slots from a cluster, in
// order, nil for a missing one; a plain MGET of them is refused.
func TestMGetAcrossSlots(t *testing.T) {
	rdb := testenv.NewRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := testenv.RandomPrefix()
	var keys []string
	for i := range 50 {
		k := fmt.Sprintf("%s{k%d}", prefix, i)
		keys = append(keys, k)
		if i%5 != 0 {
			if err := rdb.Set(ctx, k, fmt.Sprint(i), time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rdb.MGet(ctx, keys...).Err(); err == nil {
		t.Fatal("a plain MGET across slots succeeded: the keys are not spread")
	}
	p := rdb.Pipeline()
	get := redisconn.MGet(ctx, p, true, keys)
	if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	vals, err := get()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if i%5 == 0 {
			if v != nil {
				t.Errorf("key %d: %v, want nil", i, v)
			}
		} else if v != fmt.Sprint(i) {
			t.Errorf("key %d: %v, want %d", i, v, i)
		}
	}
}

// TestValidate names the field at fault.
func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		c     redisconn.Config
		field string
	}{
		{"one", redisconn.Config{Addrs: []string{"127.0.0.1:6379"}}, ""},
		{"socket", redisconn.Config{Addrs: []string{"/run/redis.sock"}}, ""},
		{"cluster", redisconn.Config{Addrs: []string{"a:1", "b:2"}}, ""},
		{"sentinel", redisconn.Config{Addrs: []string{"a:26379"}, SentinelMaster: "m", DB: 3}, ""},
		{"bad addr", redisconn.Config{Addrs: []string{"a:1", "nope"}}, "Addrs"},
		{"socket in a cluster", redisconn.Config{Addrs: []string{"/x", "a:1"}}, "Addrs"},
		{"cluster db", redisconn.Config{Addrs: []string{"a:1", "b:2"}, DB: 1}, "DB"},
		{"db", redisconn.Config{Addrs: []string{"a:1"}, DB: 16}, "DB"},
		{"master alone", redisconn.Config{SentinelMaster: "m"}, "SentinelMaster"},
		{"ca without tls", redisconn.Config{Addrs: []string{"a:1"}, TLSCAFile: "/ca.pem"}, "TLSCAFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if got := apperrField(err); got != tt.field {
				t.Fatalf("Validate() = %v, want field %q", err, tt.field)
			}
		})
	}
}

// TestNewKinds: New builds the client kind each configuration names.
func TestNewKinds(t *testing.T) {
	for _, tt := range []struct {
		c       redisconn.Config
		cluster bool
	}{
		{redisconn.Config{Addrs: []string{"127.0.0.1:1"}}, false},
		{redisconn.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, true},
		{redisconn.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, SentinelMaster: "m"}, false},
	} {
		rdb, err := redisconn.New(tt.c, "test")
		if err != nil {
			t.Fatal(err)
		}
		if got := redisconn.IsCluster(rdb); got != tt.cluster {
			t.Errorf("%s: cluster %v, want %v", tt.c.Describe(), got, tt.cluster)
		}
		if _, ok := rdb.(*redis.Client); ok == tt.cluster {
			t.Errorf("%s: %T", tt.c.Describe(), rdb)
		}
		rdb.Close()
	}
	if _, err := redisconn.New(redisconn.Config{Addrs: []string{"a:1"}, TLS: true, TLSCAFile: "/nonexistent/ca.pem"}, ""); apperrField(err) != "TLSCAFile" {
		t.Fatalf("a missing CA file: %v", err)
	}
}
