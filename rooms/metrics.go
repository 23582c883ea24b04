package rooms

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/promreg"
)

// metrics of the rooms service.
type metrics struct {
	commands      *prometheus.CounterVec
	commandSecs   *prometheus.HistogramVec
	commitBatch   prometheus.Histogram
	commitSeconds prometheus.Histogram
	inDoubt       prometheus.Counter
	loadedRooms   prometheus.GaugeFunc
	loads         *prometheus.CounterVec
	evictions     prometheus.Counter
	swept         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, loaded func() float64) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "commands_total",
			Help: "Room commands by kind and outcome (the error kind, or OK).",
		}, []string{"kind", "outcome"}),
		commandSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "command_duration_seconds",
			Help:    "Room command latency through the pipeline (apply, commit) by kind.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1},
		}, []string{"kind"}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "commit_batch_commands",
			Help:    "Commands written per transaction (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "commit_duration_seconds",
			Help:    "Duration of one group transaction.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1},
		}),
		inDoubt: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "commits_in_doubt_total",
			Help: "Group transactions whose outcome is unknown (cut at their deadline while their one query, COMMIT included, was out, or the COMMIT unanswered): their commands answer UNAVAILABLE and their rooms reload.",
		}),
		loadedRooms: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "loaded",
			Help: "Rooms whose cell is in memory.",
		}, loaded),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "loads_total",
			Help: "Cells loaded from storage (snapshot plus command-log replay) by outcome.",
		}, []string{"outcome"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "evictions_total",
			Help: "Idle cells dropped from memory.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "rooms", Name: "stale_users_swept_total",
			Help: "Users removed by the presence sweeper after their heartbeats stopped.",
		}),
	}
	r := promreg.On(reg)
	promreg.Add(r, &m.commands)
	promreg.Add(r, &m.commandSecs)
	promreg.Add(r, &m.commitBatch)
	promreg.Add(r, &m.commitSeconds)
	promreg.Add(r, &m.inDoubt)
	promreg.Add(r, &m.loadedRooms)
	promreg.Add(r, &m.loads)
	promreg.Add(r, &m.evictions)
	promreg.Add(r, &m.swept)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("rooms metrics: %w", err)
	}
	// The series alerts use exist at 0 from the start: a failure rate is
	// 0, not absent, until the first failure.
	for _, k := range allKinds {
		for _, outcome := range alertOutcomes {
			m.commands.WithLabelValues(string(k), outcome)
		}
	}
	for _, outcome := range []string{"ok", "error", "corrupt"} {
		m.loads.WithLabelValues(outcome)
	}
	return m, nil
}

// allKinds are the kinds of room commands, each a value of the kind label.
var allKinds = []Kind{
	KindCreateRoom, KindJoinRoom, KindLeaveRoom, KindHeartbeat, KindMicUp, KindMicDown, KindChangeMicSeat,
	KindSetSeatLock, KindTransferRoomHost, KindSendGift, KindSetRoomPassword, KindKickUser, KindCloseRoom,
	KindChangeRoomVisibleRegion, KindSweepStale, KindBanRoom, KindRestoreRoom,
	KindAddRoomAdmin, KindRemoveRoomAdmin, KindMuteSeat, KindSelfMute, KindSetSeatMode, KindRequestMic,
	KindCancelMicRequest, KindApproveMicRequest, KindRejectMicRequest, KindInviteToMic, KindAcceptMicInvitation,
	KindDeclineMicInvitation, KindUpdateRoomInfo, KindMuteChat, KindPKStart, KindPKScore, KindPKEnd,
}

// alertOutcomes are the outcomes of voiceroom_rooms_commands_total that alerts and
// their ratios read: success, and the server's own failures.
var alertOutcomes = []string{"OK", string(apperr.Unavailable), string(apperr.Internal)}
