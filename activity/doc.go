// Package activity runs the apps' campaigns: leaderboards and tasks scored
// from ROOM_EVENTS, settled into the wallets through the ledger. It is the
// event stream's third kind of consumer, with a durable of its own
// (ACTIVITY), its own offset, dead letters and replay, run by the
// `activity` role (on by default in `serve`), N processes on one durable.
//
// # Who owns what (the contract between its parts)
//
//   - Definitions (define.go, store_mysql.go): an operator's activity, its
//     validation (every 400 names its field) and its rows in `activities`
//     (migration 00016). A definition never changes after creation; only
//     its status and settlement columns move, forward. Cancel moves
//     settle_state from open or frozen (never paying or settled) to
//     cancelled under the row's lock; so that a cancel is never
//     overwritten, every other transition of settle_state is conditional on
//     the state it leaves (UPDATE ... WHERE settle_state = ?) and checks
//     that it changed a row. Definitions set catchup_state once, at
//     creation (reading for a start in the past, else none); the read
//     back moves it on.
//   - Scoring (score.go): the durable consumer. For each event and each
//     activity of its app that the event counts for (metric, gift ids,
//     regions, the window by occurred_at_ms, the state from the cached
//     list: no lock of the activity's row; just before the transaction,
//     one read by primary key of the batch's activities' states drops
//     those no longer open, so that an event that occurred after a cancel
//     committed counts nothing for it), the delivery batch's one MySQL
//     transaction (score_batch.go: rows in one key order, so N scorers do
//     not deadlock) inserts activity_seen (activity, event_id), and, when
//     that row is new,
//     adds to activity_scores and, for a task whose target the score
//     reaches in its period, inserts the activity_payouts row (reason
//     task). A redelivered, replayed or read-back event finds its seen row
//     and counts nothing: each event counts once per activity. Redis boards
//     are updated after the commit and rebuilt from MySQL when missing.
//   - Retroactive start (catchup.go): an activity created after its start
//     (RetroactiveMargin) is stored in catch-up state reading, and the live
//     durable skips it. A CatchUp (one per activity at a time, under the
//     catch-up lease of migration 00017) reads ROOM_EVENTS back from its
//     start with an ordered consumer of its own (start-time delivery, or
//     catchup_seq+1 on resume), scoring only that activity through the
//     live scorer's per-event code (countTx), many events per transaction
//     with catchup_seq in it. At the stream's end it writes joining and
//     live_from_seq = L: the live durable scores it above L once its list
//     is read again; the read back goes on until every live list is
//     newer than the joining, then up to the durable's last delivered
//     sequence, and writes joined. activity_seen counts the overlap once,
//     and mic_seconds pairs a speaker's seat events in room order whatever
//     order they are scored in (score_mic.go). Settlement freezes
//     only catch-up states none and joined.
//   - Boards and progress (board.go): reads for users, from Redis, or from
//     MySQL when Redis is down. Ties go to whoever reached the score first.
//   - Settlement (settle.go, payout.go): a stored state machine per
//     activity, open -> frozen -> paying -> settled, driven by whichever
//     process holds its lease. Frozen once the durable has passed the end
//     plus a grace; the ranks owed are written to activity_payouts; each
//     payout is paid once with its ledger entry key
//     activity:<id>:<reason>:<period_start_ms>:<user_id>, marked paid in the
//     same transaction, and announced as ActivityRewarded through the outbox;
//     ActivitySettled goes out when none is left unpaid. "The durable has
//     passed the end" is ScoringProgress (scoring_progress.go;
//     bus.DurableProgress reads the outbox and the durable's ack floor); the
//     operators' controls (settle now, rerun, payouts) are Settlements
//     (settlement.go), which only change the stored state.
//
// Days and weeks are those of the app's time zone (VOICEROOM_APP_TIMEZONES),
// as for the ranks (roomranks.Calendar).
package activity
