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
	r := promreg.On(reg)
	s := r.Sub("rooms")
	m := &metrics{
		commands: s.CounterVec("commands_total",
			"Room commands by kind and outcome (the error kind, or OK).", "kind", "outcome"),
		commandSecs: s.HistogramVec("command_duration_seconds",
			"Room command latency through the pipeline (apply, commit) by kind.",
			[]float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1}, "kind"),
		commitBatch: s.Histogram("commit_batch_commands",
			"Commands written per transaction (group commit).",
			[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256}),
		commitSeconds: s.Histogram("commit_duration_seconds",
			"Duration of one group transaction.",
			[]float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1}),
		inDoubt: s.Counter("commits_in_doubt_total",
			"Group transactions whose outcome is unknown (cut at their deadline while their one query, COMMIT included, was out, or the COMMIT unanswered): their commands answer UNAVAILABLE and their rooms reload."),
		loadedRooms: s.GaugeFunc("loaded",
			"Rooms whose cell is in memory.", loaded),
		loads: s.CounterVec("loads_total",
			"Cells loaded from storage (snapshot plus command-log replay) by outcome.", "outcome"),
		evictions: s.Counter("evictions_total",
			"Idle cells dropped from memory."),
		swept: s.Counter("stale_users_swept_total",
			"Users removed by the presence sweeper after their heartbeats stopped."),
	}
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
