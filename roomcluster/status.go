package roomcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoDeployment is a Snapshot of a JetStream on which no rooms node or
// router has recorded P yet (bucket ConfigBucket or its key "partitions"
// missing).
var ErrNoDeployment = errors.New("roomcluster: no rooms deployment on this JetStream: bucket " + ConfigBucket +
	" has no key partitions (no rooms node or api process has started against it)")

// Unreadable stands in Status.Owners for a lease whose value does not
// decode: the key exists, so nobody can take the partition until it
// expires or is deleted.
const Unreadable = "(unreadable lease)"

// Status is the cluster as its buckets hold it at one moment: the
// deployment's P, the live nodes' records and each partition's holder. A
// node that died keeps its member record and leases until they expire
// (the lease TTL); one that shut down gracefully has deleted them.
type Status struct {
	// Partitions is P as the deployment recorded it.
	Partitions int
	// LeaseTTL is the lease bucket's TTL, the lease's life (0 when the
	// bucket is missing: JetStream restarted and no node recreated it
	// yet).
	LeaseTTL time.Duration
	// Members are the member records, by node id.
	Members []Member
	// Owners is, by partition, the node id of the lease's holder, "" when
	// the partition is free, or Unreadable.
	Owners []string
}

// Held returns how many partitions each holder has and how many are
// free. A holder may be missing from Members: its record expired or was
// deleted first (a node shutting down deletes its record, then hands its
// partitions over).
func (s Status) Held() (byNode map[string]int, free int) {
	byNode = map[string]int{}
	for _, h := range s.Owners {
		if h == "" {
			free++
			continue
		}
		byNode[h]++
	}
	return byNode, free
}

// Snapshot reads the config, member and lease buckets once, without
// creating or changing anything; it returns ErrNoDeployment when P was
// never recorded. It is what `voiceroom nodes` prints.
func Snapshot(ctx context.Context, js jetstream.JetStream) (Status, error) {
	var st Status
	conf, err := js.KeyValue(ctx, ConfigBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return st, ErrNoDeployment
	}
	if err != nil {
		return st, fmt.Errorf("roomcluster: bucket %s: %w", ConfigBucket, err)
	}
	e, err := conf.Get(ctx, "partitions")
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, ErrNoDeployment
	}
	if err != nil {
		return st, fmt.Errorf("roomcluster: read partitions: %w", err)
	}
	if st.Partitions, err = strconv.Atoi(strings.TrimSpace(string(e.Value()))); err != nil || st.Partitions < 1 {
		return st, fmt.Errorf("roomcluster: bucket %s, key partitions: %q is not a partition count", ConfigBucket, e.Value())
	}
	st.Owners = make([]string, st.Partitions)

	leases, err := readBucket(ctx, js, LeaseBucket)
	if err != nil {
		return st, err
	}
	for _, e := range leases.entries {
		p, ok := partitionOfKey(e.Key())
		if !ok || p >= st.Partitions {
			continue
		}
		var l Lease
		if json.Unmarshal(e.Value(), &l) != nil || l.Node == "" {
			st.Owners[p] = Unreadable
			continue
		}
		st.Owners[p] = l.Node
	}
	st.LeaseTTL = leases.ttl

	members, err := readBucket(ctx, js, MemberBucket)
	if err != nil {
		return st, err
	}
	for _, e := range members.entries {
		var m Member
		if json.Unmarshal(e.Value(), &m) != nil {
			m = Member{}
		}
		m.Node = e.Key() // the key is the node's id, whatever the value says
		st.Members = append(st.Members, m)
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.Node, b.Node) })
	return st, nil
}

// bucketValues are the current values of a TTL bucket and its TTL.
type bucketValues struct {
	entries []jetstream.KeyValueEntry
	ttl     time.Duration
}

// readBucket reads every live key of a bucket with one watch (deleted and
// expired keys left out); a missing bucket has none.
func readBucket(ctx context.Context, js jetstream.JetStream, bucket string) (bucketValues, error) {
	var v bucketValues
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("roomcluster: bucket %s: %w", bucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return v, fmt.Errorf("roomcluster: bucket %s: %w", bucket, err)
	}
	v.ttl = status.TTL()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return v, fmt.Errorf("roomcluster: watch %s: %w", bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("roomcluster: read %s: %w", bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return v, fmt.Errorf("roomcluster: read %s: the watch ended early", bucket)
			}
			if e == nil { // every current value delivered
				return v, nil
			}
			v.entries = append(v.entries, e)
		}
	}
}
