package rooms

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/roomevent"
	"voiceroom/wallet"
)

// Users tells the service who a user is: their display id (a new room's
// short id) and region (a new room's visible region). A user without a
// profile is an *apperr.Error of kind NotFound.
type Users interface {
	UserRegion(ctx context.Context, appCode string, userID int64) (displayUserID string, regionID int64, err error)
}

// Regions checks that a region may be a room's visible region: nil for 0
// (GLOBAL) or an active region of the app.
type Regions interface {
	CheckRegion(ctx context.Context, appCode string, regionID int64) error
}

// FastPath is handed the outbox messages of each group commit, in commit
// order and, for each room, in room_version order. It must return quickly
// and never fail a command: the relay publishes whatever it does not.
type FastPath interface {
	// Taking reports whether the fast path takes new events now. When it
	// does, a group commit writes its outbox rows in flight
	// (voiceroom.OutboxGroup) instead of pending, and Committed must
	// settle the group: release it once every event is in the stream, or
	// set its rows back to pending.
	Taking() bool
	// Committed hands over the messages of one committed group, whose
	// rows group covers when it is in flight.
	Committed(msgs []bus.Message, group voiceroom.OutboxGroup, committedAt time.Time)
	// Behind is told, when a room loads with events still pending in the
	// outbox (committed by another process: a node the room was taken
	// from, or this one before a restart), the newest of them, so that
	// the room's next events wait for the relay to publish it.
	Behind(key RoomKey, newestEventID string)
}

// Service owns the rooms of this process: one cell per loaded room, the
// command pipeline, recovery, the presence sweeper and eviction.
type Service struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	store     *store
	reads     *sql.DB // the audit trail's reads: store.db unless SetReads gave replicas
	committer *committer
	gifts     *giftCatalog
	wallet    *wallet.Store
	users     Users
	regions   Regions
	fast      FastPath
	own       Ownership // nil: every room is served here
	attempts  *attemptLimiter
	metrics   *metrics
	// moderation counts operator actions (audit.go).
	moderation *ModerationCounter

	mu     sync.Mutex
	cells  map[roomKey]*cell
	groups map[string]roomKey // IM GroupId → room, of every loaded cell (the join-group callback)
}

// roomKey is the shared room identity (voiceroom.RoomKey): one cell per key.
type roomKey = voiceroom.RoomKey

// New returns a Service and starts its committer. fast may be nil. Close
// stops it.
func New(db *sql.DB, users Users, regions Regions, fast FastPath, cfg Config, log *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg:      cfg,
		log:      log.With("component", "rooms"),
		now:      now,
		store:    &store{db: db},
		gifts:    &giftCatalog{db: db, now: now, cache: map[giftKey]cachedGift{}},
		wallet:   wallet.New(db, now),
		users:    users,
		regions:  regions,
		fast:     fast,
		attempts: newAttemptLimiter(cfg.PasswordAttempts, time.Minute, now),
		cells:    map[roomKey]*cell{},
		groups:   map[string]roomKey{},
	}
	var err error
	s.metrics, err = newMetrics(reg, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.cells))
	})
	if err != nil {
		return nil, err
	}
	if s.moderation, err = NewModerationCounter(reg); err != nil {
		return nil, err
	}
	s.committer = newCommitter(db, fast, s.log, s.metrics, now, cfg.CommitWorkers, cfg.CommitBatch, cfg.CommandTimeout)
	return s, nil
}

// Close stops the committer after it wrote what was queued. Commands after
// Close fail with UNAVAILABLE. Call it once HTTP has stopped.
func (s *Service) Close() { s.committer.stop() }

// Wallet returns the coin wallets the service debits.
func (s *Service) Wallet() *wallet.Store { return s.wallet }

// Result is the answer to a command: the room after it. Replayed is true
// when the command_id had been applied before and View is that first
// answer.
type Result struct {
	View     View
	Replayed bool
	// Epoch is the partition lease's revision under which the command was
	// answered (0 without an Ownership), and Node the rooms node that
	// answered it (set by the router); neither is part of the HTTP answer.
	Epoch uint64
	Node  string
	// ViewJSON is the view as JSON, in place of View, when the command
	// asked for it (Command.ViewJSON) and another node answered it.
	ViewJSON []byte
}

// NewRoomID returns the id of a room created by owner: from the
// Idempotency-Key when there is one (clientKey), so a repeated create
// names the same room, else fresh. A CreateRoom's caller chooses it (a
// router must know it to find the room's partition); Execute chooses it
// for a CreateRoom that comes without one.
func NewRoomID(appCode string, owner int64, commandID string, clientKey bool) string {
	if clientKey {
		return appCode + "_" + uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d/%s", appCode, owner, commandID)).String()
	}
	return appCode + "_" + uuid.NewString()
}

// Bounds of what clients send.
const (
	maxTitle       = 64
	maxDescription = 500
	maxURL         = 512
	maxReason      = maxAuditReason
	maxCommandID   = 64
)

var modePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// NewCommandID returns a fresh command id, for commands without an
// Idempotency-Key.
func NewCommandID() string { return uuid.NewString() }

// ValidCommandID checks a client's Idempotency-Key.
func ValidCommandID(id string) error {
	if id == "" || len(id) > maxCommandID {
		return apperr.Invalid("Idempotency-Key", "must be 1..%d characters", maxCommandID)
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return apperr.Invalid("Idempotency-Key", "must not hold spaces or control characters")
		}
	}
	return nil
}

// checkCreate checks and normalizes CreateRoom's arguments in place: a
// name of 1..64 characters, a description of at most 500, a cover that is
// an http(s) URL (the default cover when none), a seat count, mode and
// seat mode in range (their defaults when none). Nothing else of Args is
// kept: the owner's short id and region are prepare's.
func (s *Service) checkCreate(a *Args) error {
	title := strings.TrimSpace(a.Title)
	if err := checkText("room_name", title, 1, maxTitle); err != nil {
		return err
	}
	desc := strings.TrimSpace(a.Description)
	if err := checkText("room_description", desc, 0, maxDescription); err != nil {
		return err
	}
	cover := strings.TrimSpace(a.CoverURL)
	if cover == "" {
		cover = s.cfg.DefaultCoverURL
	} else if err := checkURL("room_avatar", cover); err != nil {
		return err
	}
	seats := a.SeatCount
	if seats == 0 {
		seats = DefaultSeatCount
	}
	if seats < 1 || seats > MaxSeatCount {
		return apperr.Invalid("seat_count", "must be 1..%d", MaxSeatCount)
	}
	mode := a.Mode
	if mode == "" {
		mode = DefaultMode
	}
	if !modePattern.MatchString(mode) {
		return apperr.Invalid("mode", "must be 1..32 of [a-z0-9_], starting with a letter")
	}
	seatMode := a.SeatMode
	if seatMode == "" {
		seatMode = roomevent.SeatModeFree
	}
	if err := validSeatMode(seatMode); err != nil {
		return err
	}
	*a = Args{Title: title, CoverURL: cover, Description: desc, SeatCount: seats, Mode: mode, SeatMode: seatMode}
	return nil
}

func (s *Service) ownerHasNoRoom(ctx context.Context, appCode string, owner int64) error {
	existing, err := s.store.activeRoomOf(ctx, appCode, owner)
	if err != nil {
		return apperr.Wrap(apperr.Unavailable, "room storage unavailable, try again", err)
	}
	if existing != "" {
		return errOwnerHasRoom.WithDetails(map[string]string{"room_id": existing})
	}
	return nil
}

// Execute runs a room command, every kind a caller may send: CreateRoom
// makes the room (its id is the command's, or NewRoomID's when it has
// none; its short id is the owner's display_user_id and its visible
// region the owner's region now; an owner with an active room gets
// ALREADY_EXISTS with that room's id in the details), every other kind
// runs on an existing room. The room's cell applies the command to a copy
// of its state; an accepted command commits (command log, outbox rows,
// snapshot when due, wallet debit, audit) in one transaction before its
// new state replaces the old; a rejected one persists nothing. What a
// kind needs looked up first (prepare) is looked up before the room is
// locked. Kinds only the service issues (SweepStale) are refused.
func (s *Service) Execute(ctx context.Context, cmd *Command) (Result, error) {
	if err := s.checkArgs(cmd); err != nil {
		return Result{}, err
	}
	if cmd.Kind == KindCreateRoom && cmd.RoomID == "" {
		cmd.RoomID = NewRoomID(cmd.AppCode, cmd.Actor.UserID, cmd.CommandID, cmd.ClientKey)
	}
	return s.run(ctx, cmd)
}

// internalKinds are the kinds only the service issues, never a caller.
var internalKinds = map[Kind]bool{KindSweepStale: true}

// reasonKinds are the kinds that carry an operator's reason: true where
// it is required.
var reasonKinds = map[Kind]bool{KindChangeRoomVisibleRegion: true, KindBanRoom: true, KindRestoreRoom: true, KindCloseRoom: false}

// checkArgs checks and normalizes what a caller sent with a command, as it
// comes (the HTTP edge checks the shapes too): the kind is one a caller
// may send, a new room's arguments are in range, an operator's reason is
// trimmed and bounded (and dropped by kinds that carry none), a room's new
// information is trimmed and bounded, a seat mode and a mute's length are
// in range.
func (s *Service) checkArgs(cmd *Command) error {
	if !slices.Contains(allKinds, cmd.Kind) || internalKinds[cmd.Kind] {
		return apperr.Invalid("kind", "%q is not a room command a caller may send", cmd.Kind)
	}
	a := &cmd.Args
	if pkKinds[cmd.Kind] {
		return checkPK(cmd)
	}
	a.PK = nil
	if required, ok := reasonKinds[cmd.Kind]; ok {
		reason, err := checkReason(a.Reason, required)
		if err != nil {
			return err
		}
		a.Reason = reason
	} else {
		a.Reason = ""
	}
	switch cmd.Kind {
	case KindCreateRoom:
		return s.checkCreate(a)
	case KindUpdateRoomInfo:
		return CheckRoomInfo(a.Info)
	case KindSetSeatMode:
		return validSeatMode(a.SeatMode)
	case KindMuteChat:
		if a.MuteSeconds < 0 || a.MuteSeconds > MaxMuteSeconds {
			return apperr.Invalid("seconds", "must be 0..%d", MaxMuteSeconds)
		}
	case KindRequestMic, KindApproveMicRequest, KindInviteToMic:
		if a.SeatIndex < AnySeat || a.SeatIndex >= MaxSeatCount {
			return apperr.Invalid("seat_index", "must be 0..%d", MaxSeatCount-1)
		}
	}
	switch cmd.Kind {
	case KindAddRoomAdmin, KindRemoveRoomAdmin, KindApproveMicRequest, KindRejectMicRequest, KindInviteToMic, KindMuteChat:
		if a.TargetUserID <= 0 {
			return apperr.Invalid("user_id", "must be a positive number")
		}
	}
	if a.TargetUserID < 0 {
		return apperr.Invalid("user_id", "must be a positive number")
	}
	return nil
}

// prepare resolves, before the room is locked, the inputs a command's
// rules read and its caller cannot be trusted with, per kind: CreateRoom's
// owner (a profile, no active room) with their short id and region;
// JoinRoom's password, checked against the room's hash (bcrypt is slow on
// purpose and must not hold up the room; wrong passwords are rate limited
// per user); SetRoomPassword's new hash; SendGift's catalog entry;
// ChangeRoomVisibleRegion's region. Whatever of these the command came
// with is discarded first. after, when not nil, is told the command's
// outcome.
func (s *Service) prepare(ctx context.Context, cmd *Command) (after func(error), err error) {
	a := &cmd.Args
	a.ShortID, a.PasswordHash, a.PasswordGiven, a.GiftName, a.Price, a.HeatPer = "", "", false, "", 0, 0
	switch cmd.Kind {
	case KindCreateRoom:
		a.RegionID = 0
		display, region, err := s.users.UserRegion(ctx, cmd.AppCode, cmd.Actor.UserID)
		if apperr.Is(err, apperr.NotFound) {
			return nil, errNoProfile
		}
		if err != nil {
			return nil, err
		}
		a.ShortID, a.RegionID = display, region
		return nil, s.ownerHasNoRoom(ctx, cmd.AppCode, cmd.Actor.UserID)
	case KindJoinRoom:
		return s.checkPassword(ctx, cmd)
	case KindSetRoomPassword:
		if cmd.Password != "" {
			if a.PasswordHash, err = hashPassword(cmd.Password, s.cfg.BcryptCost); err != nil {
				return nil, err
			}
		}
	case KindSendGift:
		gift, err := s.gifts.get(ctx, cmd.AppCode, a.GiftID)
		if err != nil {
			return nil, err
		}
		a.GiftID, a.GiftName, a.Price, a.HeatPer = gift.GiftID, gift.Name, gift.Price, gift.Heat
	case KindChangeRoomVisibleRegion:
		return nil, s.regions.CheckRegion(ctx, cmd.AppCode, a.RegionID)
	}
	return nil, nil
}

// checkPassword checks a JoinRoom's password, when it has one, against
// the room's hash; after counts a refused join of a locked room without
// the right password against the user's attempts.
func (s *Service) checkPassword(ctx context.Context, cmd *Command) (after func(error), err error) {
	if cmd.Password == "" {
		return nil, nil
	}
	key := attemptKey{cmd.AppCode, cmd.RoomID, cmd.Actor.UserID}
	if !s.attempts.allow(key) {
		return nil, apperr.New(apperr.RateLimited, "too many wrong passwords, try again in a minute")
	}
	st, err := s.current(ctx, roomKey{AppCode: cmd.AppCode, RoomID: cmd.RoomID})
	if err != nil {
		return nil, err
	}
	cmd.Args.PasswordGiven = true
	if passwordMatches(st.PasswordHash, cmd.Password) {
		cmd.Args.PasswordHash = st.PasswordHash
	}
	return func(err error) {
		if err != nil && st.Locked() && cmd.Args.PasswordHash == "" {
			s.attempts.fail(key)
		}
	}, nil
}

// Bounds of a room's information.
const (
	// MaxNotice bounds a room's notice (announcement).
	MaxNotice = 500
)

// CheckRoomInfo trims and checks an UpdateRoomInfo change in place: a name
// of 1..64 characters, a notice and a description of at most 500, a cover
// that is an http(s) URL; at least one field.
func CheckRoomInfo(info *RoomInfo) error {
	if info == nil || (info.Title == nil && info.Notice == nil && info.CoverURL == nil && info.Description == nil) {
		return apperr.Invalid("room_name", "give at least one of room_name, notice, room_avatar, room_description")
	}
	check := func(v *string, field string, minLen, maxLen int) error {
		if v == nil {
			return nil
		}
		*v = strings.TrimSpace(*v)
		return checkText(field, *v, minLen, maxLen)
	}
	if err := check(info.Title, "room_name", 1, maxTitle); err != nil {
		return err
	}
	if err := check(info.Notice, "notice", 0, MaxNotice); err != nil {
		return err
	}
	if err := check(info.Description, "room_description", 0, maxDescription); err != nil {
		return err
	}
	if info.CoverURL != nil {
		*info.CoverURL = strings.TrimSpace(*info.CoverURL)
		if err := checkURL("room_avatar", *info.CoverURL); err != nil {
			return err
		}
	}
	return nil
}

// MicRequests returns a room's requests to speak that stand now, in order
// of arrival, to the host's powers (the owner, the host, a room admin in
// the room, an operator).
func (s *Service) MicRequests(ctx context.Context, appCode, roomID string, actor Actor) ([]MicRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	key := roomKey{AppCode: appCode, RoomID: roomID}
	if _, err := s.serving(key); err != nil {
		return nil, err
	}
	st, err := s.current(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := st.mustModerate(actor); err != nil {
		return nil, err
	}
	return st.LiveRequests(s.now().UnixMilli()), nil
}

// UpsertGift creates or updates a catalog entry.
func (s *Service) UpsertGift(ctx context.Context, appCode string, g Gift) error {
	return s.records().UpsertGift(ctx, appCode, g)
}

// Records are the room data any process may serve, without a room's
// cell: the gift catalog's writes and the audit trail's reads. An api
// process that routes room commands to rooms nodes serves these itself.
type Records struct {
	store *store
	reads *sql.DB // the audit trail's reads: store.db unless SetReads gave replicas
	gifts *giftCatalog
}

// NewRecords returns the Records of db.
func NewRecords(db *sql.DB, now func() time.Time) *Records {
	return &Records{store: &store{db: db}, reads: db, gifts: &giftCatalog{db: db, now: now, cache: map[giftKey]cachedGift{}}}
}

func (s *Service) records() *Records {
	reads := s.reads
	if reads == nil {
		reads = s.store.db
	}
	return &Records{store: s.store, reads: reads, gifts: s.gifts}
}

// SetReads makes the audit trail read from reads, a pool of replicas that
// may lag (package readdb): an action shows in it within the lag. Call it
// before the Records serve.
func (r *Records) SetReads(reads *sql.DB) { r.reads = reads }

// SetReads is Records.SetReads for the Service's audit trail.
func (s *Service) SetReads(reads *sql.DB) { s.reads = reads }

// UpsertGift is Service.UpsertGift, for a process without the rooms role.
func (r *Records) UpsertGift(ctx context.Context, appCode string, g Gift) error {
	return r.gifts.upsert(ctx, appCode, g)
}

// Get returns a room's view: from its cell when loaded, else from the
// stored snapshot when no command came after it, else by loading the cell.
func (s *Service) Get(ctx context.Context, appCode, roomID string) (View, error) {
	key := roomKey{AppCode: appCode, RoomID: roomID}
	if _, err := s.serving(key); err != nil {
		return View{}, err
	}
	if c := s.loadedCell(key); c != nil {
		if st := c.state.Load(); st != nil {
			return st.View(), nil
		}
	}
	st, ok, err := s.store.storedSnapshot(ctx, appCode, roomID)
	if err != nil {
		return View{}, storageErr(err)
	}
	if ok {
		return st.View(), nil
	}
	st, err = s.current(ctx, key)
	if err != nil {
		return View{}, err
	}
	return st.View(), nil
}

// run is the pipeline: CommandTimeout bounds it all, prepare's look-ups
// included, from the start to the answer.
func (s *Service) run(ctx context.Context, cmd *Command) (res Result, err error) {
	start := s.now()
	defer func() {
		outcome := "OK"
		if err != nil {
			outcome = string(apperr.CodeOf(err))
		}
		s.metrics.commands.WithLabelValues(string(cmd.Kind), outcome).Inc()
		s.metrics.commandSecs.WithLabelValues(string(cmd.Kind)).Observe(s.now().Sub(start).Seconds())
	}()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()

	key := roomKey{AppCode: cmd.AppCode, RoomID: cmd.RoomID}
	if _, err := s.serving(key); err != nil {
		return Result{}, err
	}
	if cmd.ClientKey && cmd.Kind == KindCreateRoom {
		// A repeated create finds its room before checking the owner has
		// none; other commands look their key up once, under the lock.
		if res, found, err := s.replayed(ctx, key, cmd); found || err != nil {
			return res, err
		}
	}
	after, err := s.prepare(ctx, cmd)
	if err != nil {
		if cmd.ClientKey && cmd.Kind == KindCreateRoom && apperr.CodeOf(err) == apperr.AlreadyExists {
			// The owner's room may be this create's, its first run (a
			// router's attempt that timed out) committed since the
			// look-up above: answer it as a repeat.
			if res, found, rerr := s.replayed(ctx, key, cmd); found || rerr != nil {
				return res, rerr
			}
		}
		return Result{}, err
	}
	if after != nil {
		defer func() { after(err) }()
	}
	c, err := s.lockCell(ctx, key, cmd.Kind == KindCreateRoom)
	if err != nil {
		return Result{}, err
	}
	defer c.unlock()
	return s.execLocked(ctx, c, cmd)
}

// execLocked runs cmd on c, whose token the caller holds.
func (s *Service) execLocked(ctx context.Context, c *cell, cmd *Command) (Result, error) {
	key := c.key
	if cmd.ClientKey {
		// Looked up again under the lock: the first run may have just committed.
		if stored, found, err := s.store.lookupCommand(ctx, key.AppCode, key.RoomID, cmd.CommandID); err != nil {
			return Result{}, storageErr(err)
		} else if found {
			cur := c.state.Load()
			res, err := decodeResult(stored, cur)
			if err == nil && (cur == nil || res.View.RoomVersion > cur.Version) {
				// It committed after this cell loaded: a write whose outcome
				// was in doubt, finished by MySQL once its lock wait ended.
				// The cell is stale; the next command reloads.
				s.drop(c)
			}
			if err != nil {
				return Result{}, err
			}
			if res.Epoch, err = s.serving(key); err != nil {
				return Result{}, err // answered by the partition's next owner
			}
			return res, nil
		}
	}

	now := s.now().UnixMilli()
	cmd.NowMs = now
	cur := c.state.Load()
	var next *State
	var events []Event
	if cmd.Kind == KindCreateRoom {
		if cur != nil {
			return Result{}, apperr.New(apperr.AlreadyExists, "room %s exists", cmd.RoomID)
		}
		next, events = newRoom(cmd)
	} else {
		next = cur.Clone()
		var changed bool
		var err error
		events, changed, err = apply(next, cmd, limits{maxOnline: s.cfg.MaxOnline, micRequestTTLMs: s.cfg.MicRequestTTL.Milliseconds()}, false)
		if err != nil {
			return Result{}, err
		}
		c.touch(cmd, now)
		if !changed {
			epoch, err := s.serving(key)
			if err != nil {
				return Result{}, err
			}
			return Result{View: cur.View(), Epoch: epoch}, nil
		}
		next.Version = cur.Version + 1
		next.UpdatedAtMs = now
	}

	m, view, err := s.mutation(c, cmd, next, events)
	if err != nil {
		return Result{}, err
	}
	if err := s.committer.commit(ctx, m); err != nil {
		if errors.Is(err, errInDoubt) {
			s.log.Warn("room command outcome in doubt after its deadline; the room reloads", "app_code", cmd.AppCode,
				"room_id", cmd.RoomID, "room_version", next.Version, "command_id", cmd.CommandID)
		}
		if errors.Is(err, errFenced) {
			s.fenced(key)
		}
		if errors.Is(err, errFenced) || errors.Is(err, errInDoubt) || cur == nil {
			// Stale, maybe changed by a write whose outcome is unknown, or the
			// empty cell of a create that did not happen: the next command
			// reloads what MySQL holds.
			s.drop(c)
		}
		if errors.Is(err, errOwnerHasRoom) {
			if existing, _ := s.store.activeRoomOf(ctx, cmd.AppCode, cmd.Actor.UserID); existing != "" {
				return Result{}, errOwnerHasRoom.WithDetails(map[string]string{"room_id": existing})
			}
		}
		return Result{}, err
	}
	c.committed(next, m.snapshot != nil, cmd, now)
	if m.roomAudit != nil {
		s.CountModeration(m.roomAudit.Action)
	}
	epoch, err := s.serving(key)
	if err != nil {
		// Committed, but the partition lapsed meanwhile (a pause past the
		// lease): this node may not answer OK for a room it no longer
		// serves. The outcome is the in-doubt one: a retry with the same
		// Idempotency-Key finds it.
		s.drop(c)
		return Result{}, errInDoubt
	}
	return Result{View: view, Epoch: epoch}, nil
}

// replayed answers a command whose Idempotency-Key the room's log already
// holds, without locking the room.
func (s *Service) replayed(ctx context.Context, key roomKey, cmd *Command) (Result, bool, error) {
	stored, found, err := s.store.lookupCommand(ctx, key.AppCode, key.RoomID, cmd.CommandID)
	if err != nil {
		return Result{}, false, storageErr(err)
	}
	if !found {
		return Result{}, false, nil
	}
	var cur *State
	if stored == nil {
		if cur, err = s.current(ctx, key); err != nil {
			return Result{}, true, err
		}
	}
	res, err := decodeResult(stored, cur)
	if err != nil {
		return Result{}, true, err
	}
	// Like a command run, a repeat is answered OK only by a node that
	// serves the room's partition (a router asks the next owner).
	if res.Epoch, err = s.serving(key); err != nil {
		return Result{}, true, err
	}
	return res, true, nil
}

// decodeResult is the answer to a repeated command: the stored first
// answer, or, for a command logged without one (sent without an
// Idempotency-Key, asked again by a router after a timeout), the room's
// view now.
func decodeResult(stored []byte, cur *State) (Result, error) {
	if stored == nil {
		return Result{View: cur.View(), Replayed: true}, nil
	}
	var snap View
	if err := json.Unmarshal(stored, &snap); err != nil {
		return Result{}, apperr.Wrap(apperr.Internal, "stored result unreadable", err)
	}
	return Result{View: snap, Replayed: true}, nil
}

// mutation builds what an accepted command writes, with the messages the
// fast path gets after the commit.
func (s *Service) mutation(c *cell, cmd *Command, next *State, events []Event) (*mutation, View, error) {
	view := next.View()
	var result []byte
	var err error
	if cmd.ClientKey {
		if result, err = json.Marshal(view); err != nil {
			return nil, View{}, apperr.Wrap(apperr.Internal, "encode result", err)
		}
	}
	command, err := cmd.logEntry()
	if err != nil {
		return nil, View{}, apperr.Wrap(apperr.Internal, "encode command", err)
	}
	m := &mutation{
		appCode:     cmd.AppCode,
		roomID:      cmd.RoomID,
		version:     next.Version,
		nowMs:       cmd.NowMs,
		commandID:   cmd.CommandID,
		kind:        cmd.Kind,
		actorUserID: cmd.Actor.UserID,
		requestID:   truncate(cmd.RequestID, 64),
		command:     command,
		result:      result,
		create:      cmd.Kind == KindCreateRoom,
		room: roomRow{shortID: next.ShortID, ownerUserID: next.OwnerUserID, status: next.Status,
			visibleRegionID: next.VisibleRegionID, mode: next.Mode, onlineCount: len(next.Online), createdAtMs: next.CreatedAtMs},
	}
	// Creation, closing, region changes, bans and restores always snapshot:
	// they are what a read of an unloaded room most likely wants current.
	always := cmd.Kind == KindCreateRoom || cmd.Kind == KindCloseRoom || cmd.Kind == KindChangeRoomVisibleRegion ||
		cmd.Kind == KindBanRoom || cmd.Kind == KindRestoreRoom
	if always || next.Version-c.snapshotVersion >= int64(s.cfg.SnapshotEvery) {
		if m.snapshot, err = json.Marshal(next); err != nil {
			return nil, View{}, apperr.Wrap(apperr.Internal, "encode snapshot", err)
		}
	}
	m.writeRoom = m.create || m.snapshot != nil || roomRowChanged(c.state.Load(), next)
	if cmd.Kind == KindSendGift {
		if amount := cmd.Args.Price * cmd.Args.Count; amount > 0 {
			m.debit = &wallet.Debit{AppCode: cmd.AppCode, UserID: cmd.Actor.UserID, Amount: amount,
				EntryKey: wallet.GiftEntryKey(cmd.RoomID, cmd.CommandID), RoomID: cmd.RoomID,
				ReceiverUserID: cmd.Args.TargetUserID, AtMs: cmd.NowMs}
		}
	}
	if cmd.Kind == KindChangeRoomVisibleRegion {
		old := c.state.Load().VisibleRegionID
		m.audit = &regionAudit{oldRegionID: old, newRegionID: next.VisibleRegionID, operator: cmd.Actor.Operator, reason: cmd.Args.Reason}
	}
	if m.roomAudit, err = roomAuditOf(cmd, c.state.Load(), next); err != nil {
		return nil, View{}, apperr.Wrap(apperr.Internal, "encode audit", err)
	}
	nextCard := next.Card()
	card := nextCard.AppendJSON(make([]byte, 0, 512))
	m.msgs = make([]bus.Message, 0, len(events))
	for _, ev := range events {
		env := bus.Envelope{
			EventID:      uuid.Must(uuid.NewV7()).String(),
			AppCode:      cmd.AppCode,
			RoomID:       cmd.RoomID,
			RoomVersion:  next.Version,
			EventType:    ev.Type,
			CommandID:    cmd.CommandID,
			RequestID:    truncate(cmd.RequestID, 64),
			OccurredAtMs: cmd.NowMs,
		}
		if env.Payload, err = roomevent.EncodePayload(card, ev.Body); err != nil {
			return nil, View{}, apperr.Wrap(apperr.Internal, "encode event", err)
		}
		msg, err := env.Message()
		if err != nil {
			return nil, View{}, apperr.Wrap(apperr.Internal, "encode event", err)
		}
		m.outbox = append(m.outbox, voiceroom.OutboxRow{AppCode: cmd.AppCode, EventID: env.EventID, RoomID: cmd.RoomID,
			RoomVersion: next.Version, EventType: ev.Type, Envelope: msg.Data, CreatedAtMs: cmd.NowMs})
		m.msgs = append(m.msgs, msg)
	}
	return m, view, nil
}

// roomRowChanged says whether next differs from prev in a column of the
// rooms row that other queries read: status (the active-owner and
// short-id keys, the list's operators' locks), visible region, mode,
// short id, or whether anyone is online (recovery after a restart).
func roomRowChanged(prev, next *State) bool {
	return prev == nil || prev.Status != next.Status || prev.VisibleRegionID != next.VisibleRegionID ||
		prev.Mode != next.Mode || prev.ShortID != next.ShortID || prev.OwnerUserID != next.OwnerUserID ||
		(len(prev.Online) > 0) != (len(next.Online) > 0)
}

// storageErr makes a store error a command error: kinds pass, the rest is
// UNAVAILABLE.
func storageErr(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, "room storage unavailable, try again", err)
}

func checkText(field, s string, minLen, maxLen int) error {
	n := utf8.RuneCountInString(s)
	if !utf8.ValidString(s) {
		return apperr.Invalid(field, "must be UTF-8")
	}
	if n < minLen || n > maxLen {
		if minLen > 0 && n == 0 {
			return apperr.Invalid(field, "is required")
		}
		return apperr.Invalid(field, "must be at most %d characters", maxLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' {
			return apperr.Invalid(field, "must not hold control characters")
		}
	}
	return nil
}

func checkURL(field, s string) error {
	if len(s) > maxURL {
		return apperr.Invalid(field, "must be at most %d bytes", maxURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return apperr.Invalid(field, "must be an http(s) URL")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
