package roomcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"voiceroom/rooms"
)

// ServiceName is the NATS micro service every rooms node runs:
// `nats micro list` shows the nodes, `nats micro info voiceroom-rooms`
// their endpoints, `nats micro stats voiceroom-rooms` their load.
const ServiceName = "voiceroom-rooms"

// serviceVersion is the version of the routed requests' protocol: 2
// ships each command as it is to .execute (1 had a method per command,
// all to .command, which a version 2 node still answers: legacy.go).
const serviceVersion = "2.0.0"

// SubjectPrefix starts a node's endpoints: <prefix>.<node id>.<op>.
const SubjectPrefix = "voiceroom.rooms"

// Server answers the routed requests of the rooms its node serves, as the
// node's instance of the micro service ServiceName. Each request runs in
// its own goroutine (at most MaxInFlight at once), so the micro service's
// own processing times show only the hand-off; the "data" of each
// endpoint's stats holds the requests' real count and mean latency.
type Server struct {
	node    *Node
	svc     rooms.Rooms
	log     *slog.Logger
	metrics *Metrics
	ms      micro.Service
	sem     chan struct{}
	wg      sync.WaitGroup
	stats   map[string]*endpointStats
	// closing makes every request answer not-serving at once; lastReq is
	// when the last one came (unix ns), so Stop can wait for quiet.
	closing atomic.Bool
	lastReq atomic.Int64
}

type endpointStats struct {
	count, nanos atomic.Int64
}

// Serve starts node's micro service on nc.
func Serve(nc *nats.Conn, node *Node, svc rooms.Rooms, log *slog.Logger, m *Metrics) (*Server, error) {
	s := &Server{node: node, svc: svc, log: log.With("component", "roomcluster", "node", node.id), metrics: m,
		sem: make(chan struct{}, node.cfg.MaxInFlight), stats: map[string]*endpointStats{}}
	for _, op := range ops {
		s.stats[op] = &endpointStats{}
	}
	ms, err := micro.AddService(nc, micro.Config{
		Name: ServiceName, Version: serviceVersion,
		Description: "voiceroom rooms node: room commands and live reads of the partitions it holds",
		Metadata:    map[string]string{"node": node.id, "host": node.host},
		StatsHandler: func(e *micro.Endpoint) any {
			st := s.stats[e.Name]
			if st == nil {
				return nil
			}
			n := st.count.Load()
			mean := time.Duration(0)
			if n > 0 {
				mean = time.Duration(st.nanos.Load() / n)
			}
			return map[string]any{"handled": n, "mean_latency": mean.String()}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("roomcluster: micro service: %w", err)
	}
	s.ms = ms
	g := ms.AddGroup(SubjectPrefix + "." + node.id)
	for _, op := range ops {
		if err := g.AddEndpoint(op, micro.HandlerFunc(func(req micro.Request) { s.handle(op, req) })); err != nil {
			_ = ms.Stop()
			return nil, fmt.Errorf("roomcluster: endpoint %s: %w", op, err)
		}
	}
	return s, nil
}

// stopQuiet is how long no request must have come before Stop
// unsubscribes, and stopWait the most it waits for that.
const (
	stopQuiet = 50 * time.Millisecond
	stopWait  = time.Second
)

// Stop stops answering and waits for the requests in flight. Until it
// unsubscribes it answers every request not-serving, so the routers ask
// the partitions' new holders at once: unsubscribing first would drop the
// requests already queued on the subscription, which their routers would
// ask again only after AttemptTimeout.
func (s *Server) Stop() {
	s.closing.Store(true)
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(stopQuiet / 5) {
		if time.Since(time.Unix(0, s.lastReq.Load())) >= stopQuiet {
			break
		}
	}
	if err := s.ms.Stop(); err != nil {
		s.log.Warn("micro service stop", "error", err)
	}
	s.wg.Wait()
}

func (s *Server) handle(op string, req micro.Request) {
	s.lastReq.Store(time.Now().UnixNano())
	if s.closing.Load() {
		s.metrics.served.WithLabelValues("not_serving").Inc()
		s.respond(req, reply{Node: s.node.id, Err: toWire(rooms.ErrNotServing)})
		return
	}
	select {
	case s.sem <- struct{}{}:
	default:
		s.metrics.served.WithLabelValues("overloaded").Inc()
		s.respond(req, reply{Node: s.node.id, Err: toWire(errOverloaded)})
		return
	}
	s.wg.Add(1)
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		start := time.Now()
		r, timeout, err := decode(op, req)
		if err != nil {
			s.metrics.served.WithLabelValues("bad_request").Inc()
			_ = req.Error("400", "undecodable request", nil)
			return
		}
		if _, ok := s.node.servingPartition(r.partition(s.node.cfg.Partitions)); !ok {
			s.metrics.served.WithLabelValues("not_serving").Inc()
			s.respond(req, reply{Node: s.node.id, Err: toWire(rooms.ErrNotServing)})
			return
		}
		s.node.routed.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		rep, err := r.run(ctx, s.svc)
		cancel()
		rep.Node, rep.Err = s.node.id, toWire(err)
		outcome := "ok"
		if rep.Err != nil && rep.Err.NotServing {
			outcome = "not_serving"
		}
		s.metrics.served.WithLabelValues(outcome).Inc()
		s.respond(req, rep)
		if st := s.stats[op]; st != nil {
			st.count.Add(1)
			st.nanos.Add(int64(time.Since(start)))
		}
	}()
}

// decode reads a request to endpoint op, with the time left of its
// caller's deadline.
func decode(op string, req micro.Request) (routed, time.Duration, error) {
	switch op {
	case opExecute:
		var cmd rooms.Command
		if err := decodeCommand(req.Data(), &cmd); err != nil {
			return nil, 0, err
		}
		ms, err := strconv.ParseInt(req.Headers().Get(timeoutHeader), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("header %s: %w", timeoutHeader, err)
		}
		return execute{&cmd}, millis(ms), nil
	case opCommand:
		var v v1Command
		if err := json.Unmarshal(req.Data(), &v); err != nil {
			return nil, 0, err
		}
		return execute{v.command()}, millis(v.TimeoutMs), nil
	}
	r := &read{endpoint: op}
	if err := json.Unmarshal(req.Data(), r); err != nil {
		return nil, 0, err
	}
	return r, millis(r.TimeoutMs), nil
}

func (s *Server) respond(req micro.Request, rep reply) {
	if err := req.RespondJSON(rep); err != nil {
		s.log.Warn("routed reply not sent", "error", err)
	}
}
