package roomcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// Router sends each room command and live read to the node that owns the
// room's partition and returns its answer: in process when this process's
// own node serves the partition, else as a NATS request to the owner's
// endpoint (found in the lease bucket, which the router watches). It is
// a rooms.Rooms, like the rooms service, so the HTTP edge mounts it in its
// place; it knows no command: it ships each as it is.
//
// A request that finds no owner (a hand-over in progress), an owner that
// is gone (no responders) or one that no longer serves the room is asked
// again, after a short wait, until its deadline; then it answers
// UNAVAILABLE. Only a request the owner may have run (a timeout) is asked
// again with its command id marked as a client key, so the owner answers
// it from its command log if it committed: a command is never applied
// twice.
type Router struct {
	cfg     Config
	nc      *nats.Conn
	buckets *buckets
	owners  *owners
	node    *Node       // this process's node, or nil
	local   rooms.Rooms // its rooms service, or nil
	records rooms.RecordKeeper
	log     *slog.Logger
	metrics *Metrics
	stop    context.CancelFunc
	// lastRefresh is when each partition's lease was last read directly
	// (unix ns).
	lastRefresh []atomic.Int64
}

var (
	_ rooms.Rooms        = (*Router)(nil)
	_ rooms.RecordKeeper = (*Router)(nil)
)

// NewRouter watches the lease bucket (creating the cluster's buckets when
// no rooms node has yet, and checking P like a node does). node and local
// are this process's own rooms node and service, when it runs them.
func NewRouter(ctx context.Context, js jetstream.JetStream, cfg Config, node *Node, local rooms.Rooms, records rooms.RecordKeeper, log *slog.Logger, m *Metrics) (*Router, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var b *buckets
	if node != nil {
		b = node.buckets // opened, with P and the TTL checked, by the node
	} else {
		var err error
		if b, err = openBuckets(ctx, js, cfg); err != nil {
			return nil, err
		}
	}
	r := &Router{cfg: cfg, nc: js.Conn(), buckets: b, owners: newOwners(cfg.Partitions, nil), node: node, local: local,
		records: records, log: log.With("component", "roomcluster"), metrics: m, lastRefresh: make([]atomic.Int64, cfg.Partitions)}
	m.setPartitions(cfg.Partitions)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = stop
	if node != nil {
		r.owners = node.owners // the node watches the same bucket
	} else {
		go r.owners.follow(wctx, b)
	}
	return r, nil
}

// Close stops watching the leases.
func (r *Router) Close() { r.stop() }

// Owners returns how many partitions each node holds, as the router sees
// the lease bucket ("" counts the free ones).
func (r *Router) Owners() map[string]int { return r.owners.counts() }

// Execute routes a room command, as it is, to its room's owner. A
// CreateRoom comes with its room's id (rooms.NewRoomID), which names the
// partition.
func (r *Router) Execute(ctx context.Context, cmd *rooms.Command) (rooms.Result, error) {
	if cmd.RoomID == "" {
		return rooms.Result{}, apperr.Invalid("room_id", "is required")
	}
	c := *cmd // the router's own: a retry marks it
	rep, err := r.call(ctx, execute{&c})
	if err != nil {
		return rooms.Result{}, err
	}
	res := rooms.Result{Replayed: rep.Replayed, Epoch: rep.Epoch, Node: rep.Node}
	switch {
	case rep.viewJSON != nil:
		res.ViewJSON = rep.viewJSON
	case rep.View != nil:
		res.View = *rep.View
	case !c.NoView:
		return rooms.Result{}, apperr.New(apperr.Internal, "routed command without a room")
	}
	return res, nil
}

// Get routes a room's view to its owner (its live cell).
func (r *Router) Get(ctx context.Context, appCode, roomID string) (rooms.View, error) {
	rep, err := r.call(ctx, &read{endpoint: opView, AppCode: appCode, RoomID: roomID})
	if err != nil {
		return rooms.View{}, err
	}
	if rep.View == nil {
		return rooms.View{}, apperr.New(apperr.Internal, "routed view without a room")
	}
	return *rep.View, nil
}

// MicRequests routes the read of a room's queue of requests to speak,
// by actor, to its owner (who checks that actor holds the host's powers).
func (r *Router) MicRequests(ctx context.Context, appCode, roomID string, actor rooms.Actor) ([]rooms.MicRequest, error) {
	rep, err := r.call(ctx, &read{endpoint: opMicRequests, AppCode: appCode, RoomID: roomID, Read: readMicRequests, Actor: actor})
	if err != nil {
		return nil, err
	}
	if rep.Requests == nil {
		return []rooms.MicRequest{}, nil // omitted on the wire when empty
	}
	return rep.Requests, nil
}

// UpsertGift writes the gift catalog here: it needs no room.
func (r *Router) UpsertGift(ctx context.Context, appCode string, g rooms.Gift) error {
	return r.records.UpsertGift(ctx, appCode, g)
}

// Audit reads a room's audit trail here: it needs no room's cell.
func (r *Router) Audit(ctx context.Context, appCode, roomID string, limit int, cursor string) (rooms.AuditPage, error) {
	return r.records.Audit(ctx, appCode, roomID, limit, cursor)
}

// guardTimeout bounds the IM callback's routed membership check: Tencent
// waits 2 s for the callback's answer.
const guardTimeout = 1500 * time.Millisecond

// IMGroupMember asks the owner of the room with IM GroupId groupID
// whether userID is present in it (the join-group callback). A room whose
// owner cannot be asked in time is answered as not found: the guard then
// refuses the join, as it does for a room that is not loaded.
func (r *Router) IMGroupMember(groupID string, userID int64) (appCode string, found, present bool) {
	ctx, cancel := context.WithTimeout(context.Background(), guardTimeout)
	defer cancel()
	rep, err := r.call(ctx, &read{endpoint: opGuard, GroupID: groupID, UserID: userID})
	if err != nil {
		r.log.Warn("im guard: the room's owner did not answer", "group_id", groupID, "error", err)
		return "", false, false
	}
	return rep.GuardApp, rep.Found, rep.Present
}

// defaultRouteDeadline bounds a routed request whose caller set none.
const defaultRouteDeadline = 5 * time.Second

// maxRetryWait caps the wait between two tries.
const maxRetryWait = 100 * time.Millisecond

// call sends req to its room's owner until it answers or ctx ends: in
// process, a plain call of the local rooms service, when this process's
// node serves the room's partition.
func (r *Router) call(ctx context.Context, req routed) (reply, error) {
	start := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRouteDeadline)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	p := req.partition(r.cfg.Partitions)
	wait := time.Millisecond
	for {
		if r.node != nil && r.local != nil {
			if _, ok := r.node.servingPartition(p); ok {
				rep, err := req.run(ctx, r.local)
				if !rooms.IsNotServing(err) {
					rep.Node = r.node.id
					r.observe(pathLocal, start, err)
					return rep, err
				}
			}
		}
		reason := r.try(ctx, deadline, p, req)
		if reason.done {
			r.observe(pathRemote, start, reason.err)
			return reason.rep, reason.err
		}
		r.metrics.retries.WithLabelValues(reason.retry).Inc()
		if reason.retry == retryTimeout {
			// The owner may have run it: a command is from now on looked
			// up in the room's command log before it runs again.
			req.mayHaveRun()
		}
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			r.metrics.routed.WithLabelValues("", "no_owner").Inc()
			r.metrics.routeSeconds.WithLabelValues(pathRemote).Observe(time.Since(start).Seconds())
			msg := errNoOwner.Message
			if reason.retry == retryTimeout {
				msg = errOwnerSlow.Message
			}
			return reply{}, apperr.Wrap(apperr.Unavailable, msg, fmt.Errorf("partition %d: last try: %s", p, reason.retry))
		case <-t.C:
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// attempt is the outcome of one try: done with an answer, or a reason to
// try again.
type attempt struct {
	done  bool
	rep   reply
	err   error
	retry string
}

// try asks p's owner, as the lease bucket names it, once.
func (r *Router) try(ctx context.Context, deadline time.Time, p int, req routed) attempt {
	holder, _ := r.owners.get(p)
	if holder == "" {
		// The watch tells of the next holder within milliseconds; read
		// the lease as well, now and then, in case it has not.
		if r.refreshDue(p) {
			r.refresh(ctx, p, "")
		}
		if holder, _ = r.owners.get(p); holder == "" {
			return attempt{retry: retryNoOwner}
		}
	}
	if r.node != nil && holder == r.node.id {
		// This process's node holds it but does not serve it: handing it
		// over, or its lease lapsing. The next owner is not named yet.
		return attempt{retry: retryNotServing}
	}
	data, header, err := req.message(time.Until(deadline).Milliseconds())
	if err != nil {
		return attempt{done: true, err: apperr.Wrap(apperr.Internal, "routed request not encoded", err)}
	}
	actx, cancel := context.WithTimeout(ctx, r.cfg.AttemptTimeout)
	defer cancel()
	msg, err := r.nc.RequestMsgWithContext(actx, &nats.Msg{Subject: SubjectPrefix + "." + holder + "." + req.op(), Data: data, Header: header})
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		r.refresh(ctx, p, holder)
		return attempt{retry: retryNoResponse}
	case ctx.Err() != nil:
		return attempt{retry: retryTimeout}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		r.log.Warn("routed request not answered in time; asking again", "partition", p, "node", holder, "op", req.op(),
			"attempt_timeout", r.cfg.AttemptTimeout)
		r.refresh(ctx, p, holder)
		return attempt{retry: retryTimeout}
	default:
		r.log.Warn("routed request failed", "partition", p, "node", holder, "error", err)
		return attempt{retry: retryNoResponse}
	}
	rep, err := req.decode(msg.Data)
	if err != nil {
		if msg.Header.Get("Nats-Service-Error-Code") != "" {
			return attempt{done: true, err: apperr.New(apperr.Internal, "rooms node refused the request: %s", msg.Header.Get("Nats-Service-Error"))}
		}
		return attempt{done: true, err: apperr.Wrap(apperr.Internal, "routed reply not decoded", err)}
	}
	if rep.Err != nil {
		if rep.Err.NotServing {
			r.refresh(ctx, p, holder)
			return attempt{retry: retryNotServing}
		}
		return attempt{done: true, rep: rep, err: rep.Err.err()}
	}
	return attempt{done: true, rep: rep}
}

// noOwnerRefresh is how often a router reads a free partition's lease
// itself while requests wait for a holder.
const noOwnerRefresh = 50 * time.Millisecond

// refreshDue reports whether p's lease may be read again (at most every
// noOwnerRefresh).
func (r *Router) refreshDue(p int) bool {
	now := time.Now().UnixNano()
	last := r.lastRefresh[p].Load()
	return now-last >= int64(noOwnerRefresh) && r.lastRefresh[p].CompareAndSwap(last, now)
}

// refresh reads p's lease again after its holder failed to answer: the
// watch may not have told yet that it expired or moved.
func (r *Router) refresh(ctx context.Context, p int, holder string) {
	gctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	e, err := r.buckets.lease().Get(gctx, leaseKey(p))
	r.buckets.heal(ctx, err)
	switch {
	case err == nil:
		r.owners.apply(e.Key(), e.Operation(), e.Value())
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		if cur, _ := r.owners.get(p); cur == holder {
			r.owners.set(p, "")
		}
	}
}

func (r *Router) observe(path string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.metrics.routed.WithLabelValues(path, outcome).Inc()
	r.metrics.routeSeconds.WithLabelValues(path).Observe(time.Since(start).Seconds())
}
