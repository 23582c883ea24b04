package roomcluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// buckets are the cluster's KV buckets. The lease and member buckets are
// kept in memory (a lease outliving a restart of every JetStream server
// would only hold rooms up for a TTL); heal creates them again when a
// restarted server no longer has them.
type buckets struct {
	js  jetstream.JetStream
	cfg Config

	mu       sync.Mutex
	leases   jetstream.KeyValue
	members  jetstream.KeyValue
	lastHeal time.Time
}

// openBuckets creates or opens the buckets and records or checks P.
func openBuckets(ctx context.Context, js jetstream.JetStream, cfg Config) (*buckets, error) {
	b := &buckets{js: js, cfg: cfg}
	if err := b.open(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *buckets) open(ctx context.Context) error {
	ttlBucket := func(name, desc string) (jetstream.KeyValue, error) {
		kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: desc, History: 1, TTL: b.cfg.LeaseTTL,
			// Markers make an expiry visible to watchers (a purge), so a
			// node waiting for a partition takes it at once.
			LimitMarkerTTL: b.cfg.LeaseTTL,
			Storage:        jetstream.MemoryStorage, Replicas: b.cfg.Replicas,
		})
		if err != nil {
			return nil, fmt.Errorf("roomcluster: bucket %s: %w", name, err)
		}
		return kv, nil
	}
	leases, err := ttlBucket(LeaseBucket, "voiceroom: partition leases of the rooms nodes")
	if err != nil {
		return err
	}
	members, err := ttlBucket(MemberBucket, "voiceroom: live rooms nodes and their load")
	if err != nil {
		return err
	}
	conf, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ConfigBucket, Description: "voiceroom: the rooms nodes' deployment settings", History: 1,
		Storage: jetstream.FileStorage, Replicas: b.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("roomcluster: bucket %s: %w", ConfigBucket, err)
	}
	// P and the lease TTL hold for the whole deployment: the first process
	// records them, the others must agree (a process with another TTL
	// would set the shared buckets' TTL to its own and break the others'
	// margin).
	for _, rec := range []struct {
		key, want string
		sentinel  error
		variable  string
	}{
		{"partitions", strconv.Itoa(b.cfg.Partitions), ErrPartitionsChanged, "VOICEROOM_ROOMS_PARTITIONS"},
		{"lease_ttl", b.cfg.LeaseTTL.String(), ErrLeaseTTLChanged, "VOICEROOM_ROOMS_LEASE_TTL"},
	} {
		if err := record(ctx, conf, rec.key, rec.want); err != nil {
			if errors.Is(err, errDiffers) {
				return fmt.Errorf("%w: this process has %s, the deployment %v (bucket %s, key %s): run every rooms node and api process with the same %s",
					rec.sentinel, rec.want, err, ConfigBucket, rec.key, rec.variable)
			}
			return err
		}
	}
	b.mu.Lock()
	b.leases, b.members = leases, members
	b.mu.Unlock()
	return nil
}

func (b *buckets) lease() jetstream.KeyValue {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leases
}

func (b *buckets) member() jetstream.KeyValue {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.members
}

// heal creates the buckets again after err said they are gone, at most
// once per RenewEvery.
func (b *buckets) heal(ctx context.Context, err error) {
	if !gone(err) {
		return
	}
	b.mu.Lock()
	if time.Since(b.lastHeal) < b.cfg.RenewEvery {
		b.mu.Unlock()
		return
	}
	b.lastHeal = time.Now()
	b.mu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, b.cfg.RenewEvery)
	defer cancel()
	_ = b.open(hctx) // fails while JetStream is away; tried again later
}

// gone reports whether err says a bucket's stream does not exist.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, nats.ErrNoResponders)
}

// follow watches the bucket kv returns until ctx ends: begin runs before
// each watch starts, apply for every entry, loaded once a watch has
// delivered the bucket's current values. The watch starts again when it
// ends or when nothing came for stale (a bucket written every RenewEvery
// while any node lives): a JetStream server restarted without the bucket
// ends a watch silently.
func follow(ctx context.Context, kv func() jetstream.KeyValue, stale time.Duration, begin func(), apply func(jetstream.KeyValueEntry), loaded func()) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		w, err := kv().WatchAll(wctx)
		if err != nil {
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(stale / 4):
			}
			continue
		}
		begin()
		timer := time.NewTimer(stale)
	watch:
		for {
			select {
			case <-ctx.Done():
				break watch
			case <-timer.C:
				break watch
			case e, ok := <-w.Updates():
				if !ok {
					break watch
				}
				timer.Reset(stale)
				if e == nil {
					loaded()
					continue
				}
				apply(e)
			}
		}
		timer.Stop()
		_ = w.Stop()
		cancel()
	}
}

// errDiffers is a recorded setting other than this process's.
var errDiffers = errors.New("differs")

// record writes key=want in conf unless it is there; a different value
// there is errDiffers, wrapped with the value.
func record(ctx context.Context, conf jetstream.KeyValue, key, want string) error {
	if _, err := conf.Create(ctx, key, []byte(want)); err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
		if err != nil {
			return fmt.Errorf("roomcluster: record %s: %w", key, err)
		}
		return nil
	}
	e, err := conf.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("roomcluster: read %s: %w", key, err)
	}
	if got := string(e.Value()); got != want {
		return fmt.Errorf("%s: %w", got, errDiffers)
	}
	return nil
}
