package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket holds the delivery lease: key "holder", valued with the
// holding process's name, expiring LeaseTTL after its last renewal.
const LeaseBucket = "VOICEROOM_WEBHOOKS_LEASE"

const leaseKey = "holder"

// lease is the one delivering process's claim, taken with Create (which
// succeeds only while nobody holds it) and renewed with Update at the
// revision last written (which fails once it expired or was taken).
type lease struct {
	js       jetstream.JetStream
	replicas int
	kv       jetstream.KeyValue // nil: provision the bucket again first
	holder   string
	ttl      time.Duration
	rev      uint64
}

// openLease creates or updates the bucket.
func openLease(ctx context.Context, js jetstream.JetStream, holder string, ttl time.Duration, replicas int) (*lease, error) {
	l := &lease{js: js, replicas: replicas, holder: holder, ttl: ttl}
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// open creates or updates the bucket. It is in memory (a lease outlives
// no server), so a restarted JetStream server has lost it: take provisions
// it again after a failure.
func (l *lease) open(ctx context.Context) error {
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      LeaseBucket,
		Description: "voiceroom webhooks: the process delivering",
		History:     1,
		TTL:         l.ttl,
		Storage:     jetstream.MemoryStorage,
		Replicas:    l.replicas,
	})
	if err != nil {
		return fmt.Errorf("provision bucket %s: %w", LeaseBucket, err)
	}
	l.kv = kv
	return nil
}

// take tries to take the lease; false while another process holds it.
// After an error (the server unreachable, or restarted without the
// bucket) the next take provisions the bucket again first.
func (l *lease) take(ctx context.Context) (bool, error) {
	if l.kv == nil {
		if err := l.open(ctx); err != nil {
			return false, err
		}
	}
	rev, err := l.kv.Create(ctx, leaseKey, []byte(l.holder))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		l.kv = nil
		return false, err
	}
	l.rev = rev
	return true, nil
}

// renew extends the lease; an error means it may be lost.
func (l *lease) renew(ctx context.Context) error {
	rev, err := l.kv.Update(ctx, leaseKey, []byte(l.holder), l.rev)
	if err != nil {
		return err
	}
	l.rev = rev
	return nil
}

// release gives the lease up if it is still this process's, so a standby
// takes over at once.
func (l *lease) release(ctx context.Context) {
	if l.kv != nil {
		_ = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
	}
}

// hold runs serve while the lease is held: it renews every ttl/4 and
// cancels serve's ctx once ttl/2 has passed since the send of the last
// successful renewal (well before the server can expire it and a standby
// take it), or when ctx ends. It returns serve's error.
func (l *lease) hold(ctx context.Context, serve func(context.Context) error) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		deadline := time.Now().Add(l.ttl / 2)
		tick := time.NewTicker(l.ttl / 4)
		defer tick.Stop()
		for {
			wait := time.NewTimer(time.Until(deadline))
			select {
			case <-sctx.Done():
				wait.Stop()
				return
			case <-wait.C:
				cancel() // lost: stop serving before anyone else may start
				return
			case <-tick.C:
				wait.Stop()
				sent := time.Now()
				rctx, rcancel := context.WithTimeout(sctx, l.ttl/4)
				err := l.renew(rctx)
				rcancel()
				if err == nil {
					deadline = sent.Add(l.ttl / 2)
				}
			}
		}
	}()
	err := serve(sctx)
	cancel()
	<-renewed
	return err
}
