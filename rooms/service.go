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
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"voiceroom/apperr"
	"voiceroom/bus"
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

// FastPath is handed the outbox messages of each committed command, in
// commit order and, for each room, in room_version order. It must return
// quickly and never fail the command: the relay publishes whatever it
// does not.
type FastPath interface {
	Committed(msgs []bus.Message, committedAt time.Time)
}

// Config tunes the service. Zero fields take the defaults given.
type Config struct {
	// PresenceTTL is how long a present user may go without a heartbeat
	// before the sweeper removes them (RoomUserLeft, reason stale). Default 30s.
	PresenceTTL time.Duration
	// SweepInterval is how often the sweeper looks. Default PresenceTTL/3.
	SweepInterval time.Duration
	// IdleEvict drops a cell with nobody present after this long without a
	// command. Default 10m.
	IdleEvict time.Duration
	// SnapshotEvery writes a room's snapshot every this many versions (and
	// at creation, closing, region changes and eviction); recovery replays
	// at most this many commands. Default 64.
	SnapshotEvery int
	// MaxOnline is the most users one room holds. Default 1000.
	MaxOnline int
	// CommitWorkers is the number of transactions in flight at once, and
	// CommitBatch the most commands one of them carries. Defaults 4 and 128.
	CommitWorkers, CommitBatch int
	// CommandTimeout bounds how long a command waits for its room. Default 5s.
	CommandTimeout time.Duration
	// PasswordAttempts wrong room passwords per user and room are allowed
	// per minute. Default 5.
	PasswordAttempts int
	// BcryptCost is the cost of password hashes. Default bcrypt.DefaultCost.
	BcryptCost int
	// DefaultCoverURL is a room's cover when the creator gives none.
	DefaultCoverURL string
	// RecoverLimit bounds how many rooms with users are loaded at start.
	// Default 100000.
	RecoverLimit int
}

// Validate applies defaults and checks the configuration.
func (c *Config) Validate() error {
	setDefault(&c.PresenceTTL, 30*time.Second)
	setDefault(&c.SweepInterval, c.PresenceTTL/3)
	setDefault(&c.IdleEvict, 10*time.Minute)
	setDefault(&c.SnapshotEvery, 64)
	setDefault(&c.MaxOnline, 1000)
	setDefault(&c.CommitWorkers, 4)
	setDefault(&c.CommitBatch, 128)
	setDefault(&c.CommandTimeout, 5*time.Second)
	setDefault(&c.PasswordAttempts, 5)
	setDefault(&c.BcryptCost, bcrypt.DefaultCost)
	setDefault(&c.DefaultCoverURL, "https://cdn.voiceroom.example/default-room-cover.png")
	setDefault(&c.RecoverLimit, 100000)
	switch {
	case c.PresenceTTL < time.Second:
		return fmt.Errorf("presence ttl %v: want at least 1s", c.PresenceTTL)
	case c.SweepInterval > c.PresenceTTL:
		return fmt.Errorf("sweep interval %v: longer than the presence ttl %v", c.SweepInterval, c.PresenceTTL)
	case c.CommitBatch > 1000:
		return fmt.Errorf("commit batch %d: want at most 1000", c.CommitBatch)
	case c.BcryptCost < bcrypt.MinCost || c.BcryptCost > bcrypt.MaxCost:
		return fmt.Errorf("bcrypt cost %d: want %d..%d", c.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Service owns the rooms of this process: one cell per loaded room, the
// command pipeline, recovery, the presence sweeper and eviction.
type Service struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	store     *store
	committer *committer
	gifts     *giftCatalog
	wallet    *wallet.Store
	users     Users
	regions   Regions
	fast      FastPath
	attempts  *attemptLimiter
	metrics   *metrics

	mu     sync.Mutex
	cells  map[roomKey]*cell
	groups map[string]roomKey // IM GroupId → room, of every loaded cell (the join-group callback)
}

type roomKey struct{ app, room string }

// New returns a Service and starts its committer. fast may be nil. Close
// stops it.
func New(db *sql.DB, users Users, regions Regions, fast FastPath, cfg Config, log *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Service, error) {
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
	s.metrics = newMetrics(reg, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.cells))
	})
	s.committer = newCommitter(db, s.log, s.metrics, now, cfg.CommitWorkers, cfg.CommitBatch)
	return s, nil
}

// Close stops the committer after it wrote what was queued. Commands after
// Close fail with UNAVAILABLE. Call it once HTTP has stopped.
func (s *Service) Close() { s.committer.stop() }

// Wallet returns the coin wallets the service debits.
func (s *Service) Wallet() *wallet.Store { return s.wallet }

// Result is the answer to a command: the room after it. Replayed is true
// when the command_id had been applied before and Snapshot is that first
// answer.
type Result struct {
	Snapshot Snapshot
	Replayed bool
}

// CreateRequest is what a client sends to create a room.
type CreateRequest struct {
	Title       string
	CoverURL    string
	Description string
	SeatCount   int
	Mode        string
}

// Bounds of what clients send.
const (
	maxTitle       = 64
	maxDescription = 500
	maxURL         = 512
	maxReason      = 255
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

// Create creates a room owned by the actor: CreateRoom. The room's id is
// generated (from the Idempotency-Key when there is one, so a repeated create
// finds the first room), its short id is the owner's display_user_id and its
// visible region the owner's region now. An owner with an active room gets
// ALREADY_EXISTS with that room's id in the details.
func (s *Service) Create(ctx context.Context, appCode string, actor Actor, commandID string, clientKey bool, requestID string, req CreateRequest) (Result, error) {
	args, err := s.createArgs(req)
	if err != nil {
		return Result{}, err
	}
	roomID := appCode + "_" + uuid.NewString()
	if clientKey {
		// The same key of the same owner names the same room.
		roomID = appCode + "_" + uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d/%s", appCode, actor.UserID, commandID)).String()
	}
	cmd := &Command{Kind: KindCreateRoom, AppCode: appCode, RoomID: roomID, CommandID: commandID, ClientKey: clientKey,
		RequestID: requestID, Actor: actor, Args: args}
	return s.run(ctx, cmd, func(ctx context.Context) error {
		display, region, err := s.users.UserRegion(ctx, appCode, actor.UserID)
		if apperr.Is(err, apperr.NotFound) {
			return errNoProfile
		}
		if err != nil {
			return err
		}
		cmd.Args.ShortID, cmd.Args.RegionID = display, region
		return s.ownerHasNoRoom(ctx, appCode, actor.UserID)
	})
}

func (s *Service) createArgs(req CreateRequest) (Args, error) {
	title := strings.TrimSpace(req.Title)
	if err := checkText("room_name", title, 1, maxTitle); err != nil {
		return Args{}, err
	}
	desc := strings.TrimSpace(req.Description)
	if err := checkText("room_description", desc, 0, maxDescription); err != nil {
		return Args{}, err
	}
	cover := strings.TrimSpace(req.CoverURL)
	if cover == "" {
		cover = s.cfg.DefaultCoverURL
	} else if err := checkURL("room_avatar", cover); err != nil {
		return Args{}, err
	}
	seats := req.SeatCount
	if seats == 0 {
		seats = DefaultSeatCount
	}
	if seats < 1 || seats > MaxSeatCount {
		return Args{}, apperr.Invalid("seat_count", "must be 1..%d", MaxSeatCount)
	}
	mode := req.Mode
	if mode == "" {
		mode = DefaultMode
	}
	if !modePattern.MatchString(mode) {
		return Args{}, apperr.Invalid("mode", "must be 1..32 of [a-z0-9_], starting with a letter")
	}
	return Args{Title: title, CoverURL: cover, Description: desc, SeatCount: seats, Mode: mode}, nil
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

// Execute runs a command on an existing room: the room's cell applies it to
// a copy of its state; an accepted command commits (command log, outbox rows,
// snapshot when due, wallet debit, audit) in one transaction before its new
// state replaces the old; a rejected one persists nothing.
func (s *Service) Execute(ctx context.Context, cmd *Command) (Result, error) {
	if cmd.Kind == KindCreateRoom {
		return Result{}, apperr.New(apperr.InvalidArgument, "use Create")
	}
	return s.run(ctx, cmd, nil)
}

// Join runs JoinRoom. A password, when given, is checked against the room's
// hash before the room is locked for the command (bcrypt is slow on purpose
// and must not hold up the room); wrong passwords are rate limited per user.
func (s *Service) Join(ctx context.Context, cmd *Command, password string) (Result, error) {
	cmd.Kind = KindJoinRoom
	if password == "" {
		return s.run(ctx, cmd, nil)
	}
	key := attemptKey{cmd.AppCode, cmd.RoomID, cmd.Actor.UserID}
	if !s.attempts.allow(key) {
		return Result{}, apperr.New(apperr.RateLimited, "too many wrong passwords, try again in a minute")
	}
	st, err := s.current(ctx, roomKey{cmd.AppCode, cmd.RoomID})
	if err != nil {
		return Result{}, err
	}
	cmd.Args.PasswordGiven = true
	if passwordMatches(st.PasswordHash, password) {
		cmd.Args.PasswordHash = st.PasswordHash
	}
	res, err := s.run(ctx, cmd, nil)
	if err != nil && st.Locked() && cmd.Args.PasswordHash == "" {
		s.attempts.fail(key)
	}
	return res, err
}

// SetPassword runs SetRoomPassword; an empty password unlocks.
func (s *Service) SetPassword(ctx context.Context, cmd *Command, password string) (Result, error) {
	cmd.Kind = KindSetRoomPassword
	if password != "" {
		hash, err := hashPassword(password, s.cfg.BcryptCost)
		if err != nil {
			return Result{}, err
		}
		cmd.Args.PasswordHash = hash
	}
	return s.run(ctx, cmd, nil)
}

// SendGift runs SendGift for gift giftID of the catalog.
func (s *Service) SendGift(ctx context.Context, cmd *Command, giftID int64) (Result, error) {
	cmd.Kind = KindSendGift
	gift, err := s.gifts.get(ctx, cmd.AppCode, giftID)
	if err != nil {
		return Result{}, err
	}
	cmd.Args.GiftID, cmd.Args.GiftName, cmd.Args.Price, cmd.Args.HeatPer = gift.GiftID, gift.Name, gift.Price, gift.Heat
	return s.run(ctx, cmd, nil)
}

// ChangeVisibleRegion runs ChangeRoomVisibleRegion (admin only), audited.
func (s *Service) ChangeVisibleRegion(ctx context.Context, cmd *Command, regionID int64, reason string) (Result, error) {
	cmd.Kind = KindChangeRoomVisibleRegion
	reason = strings.TrimSpace(reason)
	if err := checkText("reason", reason, 1, maxReason); err != nil {
		return Result{}, err
	}
	if err := s.regions.CheckRegion(ctx, cmd.AppCode, regionID); err != nil {
		return Result{}, err
	}
	cmd.Args.RegionID, cmd.Args.Reason = regionID, reason
	return s.run(ctx, cmd, nil)
}

// UpsertGift creates or updates a catalog entry.
func (s *Service) UpsertGift(ctx context.Context, appCode string, g Gift) error {
	return s.gifts.upsert(ctx, appCode, g)
}

// Get returns a room's snapshot: from its cell when loaded, else from the
// stored snapshot when no command came after it, else by loading the cell.
func (s *Service) Get(ctx context.Context, appCode, roomID string) (Snapshot, error) {
	key := roomKey{appCode, roomID}
	if c := s.loadedCell(key); c != nil {
		if st := c.state.Load(); st != nil {
			return st.Snapshot(), nil
		}
	}
	st, ok, err := s.store.storedSnapshot(ctx, appCode, roomID)
	if err != nil {
		return Snapshot{}, storageErr(err)
	}
	if ok {
		return st.Snapshot(), nil
	}
	st, err = s.current(ctx, key)
	if err != nil {
		return Snapshot{}, err
	}
	return st.Snapshot(), nil
}

// run is the pipeline. prepare, when set, runs before the room is locked
// (for CreateRoom: look up the owner, who has no room yet).
func (s *Service) run(ctx context.Context, cmd *Command, prepare func(context.Context) error) (res Result, err error) {
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

	key := roomKey{cmd.AppCode, cmd.RoomID}
	if cmd.ClientKey && cmd.Kind == KindCreateRoom {
		// A repeated create finds its room before checking the owner has
		// none; other commands look their key up once, under the lock.
		if res, found, err := s.replayed(ctx, key, cmd); found || err != nil {
			return res, err
		}
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return Result{}, err
		}
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
		if stored, err := s.store.lookupCommand(ctx, key.app, key.room, cmd.CommandID); err != nil {
			return Result{}, storageErr(err)
		} else if stored != nil {
			return decodeResult(stored)
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
		events, changed, err = apply(next, cmd, limits{maxOnline: s.cfg.MaxOnline}, false)
		if err != nil {
			return Result{}, err
		}
		c.touch(cmd, now)
		if !changed {
			return Result{Snapshot: cur.Snapshot()}, nil
		}
		next.Version = cur.Version + 1
		next.UpdatedAtMs = now
	}

	m, msgs, snapshot, err := s.mutation(c, cmd, next, events)
	if err != nil {
		return Result{}, err
	}
	if err := s.committer.commit(ctx, m); err != nil {
		if errors.Is(err, errFenced) || cur == nil {
			s.drop(c) // stale, or the empty cell of a create that did not happen
		}
		if errors.Is(err, errOwnerHasRoom) {
			if existing, _ := s.store.activeRoomOf(ctx, cmd.AppCode, cmd.Actor.UserID); existing != "" {
				return Result{}, errOwnerHasRoom.WithDetails(map[string]string{"room_id": existing})
			}
		}
		return Result{}, err
	}
	c.committed(next, m.snapshot != nil, cmd, now)
	if s.fast != nil && len(msgs) > 0 {
		s.fast.Committed(msgs, s.now())
	}
	return Result{Snapshot: snapshot}, nil
}

// replayed answers a command whose Idempotency-Key the room's log already
// holds, without locking the room.
func (s *Service) replayed(ctx context.Context, key roomKey, cmd *Command) (Result, bool, error) {
	stored, err := s.store.lookupCommand(ctx, key.app, key.room, cmd.CommandID)
	if err != nil {
		return Result{}, false, storageErr(err)
	}
	if stored == nil {
		return Result{}, false, nil
	}
	res, err := decodeResult(stored)
	return res, true, err
}

func decodeResult(stored []byte) (Result, error) {
	var snap Snapshot
	if err := json.Unmarshal(stored, &snap); err != nil {
		return Result{}, apperr.Wrap(apperr.Internal, "stored result unreadable", err)
	}
	return Result{Snapshot: snap, Replayed: true}, nil
}

// mutation builds what an accepted command writes, and the messages the
// fast path gets after the commit.
func (s *Service) mutation(c *cell, cmd *Command, next *State, events []Event) (*mutation, []bus.Message, Snapshot, error) {
	snapshot := next.Snapshot()
	result, err := json.Marshal(snapshot)
	if err != nil {
		return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode result", err)
	}
	command, err := json.Marshal(cmd)
	if err != nil {
		return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode command", err)
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
	// Creation, closing and region changes always snapshot: they are what
	// a read of an unloaded room most likely wants current.
	always := cmd.Kind == KindCreateRoom || cmd.Kind == KindCloseRoom || cmd.Kind == KindChangeRoomVisibleRegion
	if always || next.Version-c.snapshotVersion >= int64(s.cfg.SnapshotEvery) {
		if m.snapshot, err = json.Marshal(next); err != nil {
			return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode snapshot", err)
		}
	}
	if cmd.Kind == KindSendGift {
		if amount := cmd.Args.Price * cmd.Args.Count; amount > 0 {
			m.debit = &wallet.Debit{AppCode: cmd.AppCode, UserID: cmd.Actor.UserID, Amount: amount,
				EntryKey: wallet.GiftEntryKey(cmd.RoomID, cmd.CommandID), RoomID: cmd.RoomID}
		}
	}
	if cmd.Kind == KindChangeRoomVisibleRegion {
		old := c.state.Load().VisibleRegionID
		m.audit = &regionAudit{oldRegionID: old, newRegionID: next.VisibleRegionID, operator: cmd.Actor.Operator, reason: cmd.Args.Reason}
	}
	card, err := json.Marshal(next.Card())
	if err != nil {
		return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode card", err)
	}
	msgs := make([]bus.Message, 0, len(events))
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
		if env.Payload, err = payload(card, ev.Body); err != nil {
			return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode event", err)
		}
		msg, err := env.Message()
		if err != nil {
			return nil, nil, Snapshot{}, apperr.Wrap(apperr.Internal, "encode event", err)
		}
		m.outbox = append(m.outbox, outboxRow{eventID: env.EventID, eventType: ev.Type, envelope: msg.Data})
		msgs = append(msgs, msg)
	}
	return m, msgs, snapshot, nil
}

// payload is {"room": card, ...body's fields}.
func payload(card []byte, body any) (json.RawMessage, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(card)+len(b)+10)
	out = append(out, `{"room":`...)
	out = append(out, card...)
	if len(b) > 2 { // not "{}"
		out = append(out, ',')
		out = append(out, b[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
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
