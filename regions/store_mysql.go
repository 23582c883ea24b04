package regions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"voiceroom/mysqldb"
)

// querier is what the reads below need: a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	_ querier = (*sql.DB)(nil)
	_ querier = (*sql.Tx)(nil)
)

// Every statement below is parameterised and filters on app_code: an id of
// another app simply finds no row.
//
// Locking order, the same in every transaction, so that concurrent ones queue
// instead of deadlocking: the mapping (countries, regions) first, users
// second. Writers of the mapping lock only mapping rows.

// The statements of the hot paths: a lookup miss and a profile write. They
// are prepared once per pooled connection (see stmtCache).
const (
	sqlProfile = `SELECT u.display_user_id, u.country, u.region_id, r.region_code, u.region_source, u.updated_at_ms
		FROM users u
		LEFT JOIN regions r ON r.app_code = u.app_code AND r.region_id = u.region_id
		WHERE u.app_code = ? AND u.user_id = ?`
	sqlCountryMapping = `SELECT c.enabled, c.region_id, r.status, r.region_code
		FROM countries c
		LEFT JOIN regions r ON r.app_code = c.app_code AND r.region_id = c.region_id
		WHERE c.app_code = ? AND c.country_code = ?
		LOCK IN SHARE MODE`
	sqlLockUser = `SELECT display_user_id, country, region_id, region_source
		FROM users WHERE app_code = ? AND user_id = ? FOR UPDATE`
	sqlInsertUser = `INSERT INTO users (app_code, user_id, display_user_id, country, region_id, region_source, created_at_ms, updated_at_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	sqlUpdateUser = `UPDATE users SET display_user_id = ?, country = ?, region_id = ?, region_source = ?, updated_at_ms = ?
		WHERE app_code = ? AND user_id = ?`
	sqlRegionCode = "SELECT region_code FROM regions WHERE app_code = ? AND region_id = ?"
)

// hotStatements lists what stmtCache prepares.
func hotStatements() []string {
	return []string{sqlProfile, sqlCountryMapping, sqlLockUser, sqlInsertUser, sqlUpdateUser, sqlRegionCode, insertAuditSQL(1)}
}

// userRow is a user as the write paths read it.
type userRow struct {
	userID   int64
	display  string
	country  string
	regionID int64
	source   string
}

// countryMapping is one country of the app as a user's region is computed
// from it: found=false means the app does not offer the country.
type countryMapping struct {
	found        bool
	enabled      bool
	regionID     int64
	regionActive bool
	regionCode   string
}

// region is the rule of docs/api.md's "Regions": the region of an enabled
// country whose region is active, else GLOBAL (0).
func (m countryMapping) region() (int64, string) {
	if m.found && m.enabled && m.regionID != 0 && m.regionActive {
		return m.regionID, m.regionCode
	}
	return 0, GlobalRegionCode
}

func readProfile(ctx context.Context, q querier, app string, userID int64) (Profile, string, error) {
	p := Profile{UserID: userID}
	var code sql.NullString
	var source string
	err := q.QueryRowContext(ctx, sqlProfile, app, userID).
		Scan(&p.DisplayUserID, &p.Country, &p.RegionID, &code, &source, &p.UpdatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return Profile{}, "", ErrUserNotFound
	}
	if err != nil {
		return Profile{}, "", unavailable("read profile", err)
	}
	p.RegionCode = regionCodeOr(p.RegionID, code)
	return p, source, nil
}

func regionCodeOr(id int64, code sql.NullString) string {
	if id == 0 || !code.Valid {
		return GlobalRegionCode
	}
	return code.String
}

// lockCountryMapping reads a country and its region with shared locks, held to
// commit: an operator cannot move or disable them between this read and the
// user's write, so a rebuild that follows the operator's change sees this
// user's new row (see PutProfile).
func lockCountryMapping(ctx context.Context, q querier, app, country string) (countryMapping, error) {
	m := countryMapping{}
	var status, code sql.NullString
	err := q.QueryRowContext(ctx, sqlCountryMapping, app, country).Scan(&m.enabled, &m.regionID, &status, &code)
	if errors.Is(err, sql.ErrNoRows) {
		return m, nil
	}
	if err != nil {
		return m, unavailable("read country mapping", err)
	}
	m.found = true
	m.regionActive = status.String == string(StatusActive)
	m.regionCode = code.String
	return m, nil
}

// lockRegion reads a region with a shared lock (it cannot be disabled before
// the transaction ends).
func lockRegion(ctx context.Context, tx *sql.Tx, app string, id int64) (Region, error) {
	return scanRegion(tx.QueryRowContext(ctx, `
		SELECT region_id, region_code, name, status, created_at_ms, updated_at_ms
		FROM regions WHERE app_code = ? AND region_id = ? LOCK IN SHARE MODE`, app, id))
}

func readRegion(ctx context.Context, q querier, app string, id int64, forUpdate bool) (Region, error) {
	query := `SELECT region_id, region_code, name, status, created_at_ms, updated_at_ms
		FROM regions WHERE app_code = ? AND region_id = ?`
	if forUpdate {
		query += " FOR UPDATE"
	}
	return scanRegion(q.QueryRowContext(ctx, query, app, id))
}

func scanRegion(row *sql.Row) (Region, error) {
	var r Region
	err := row.Scan(&r.ID, &r.Code, &r.Name, &r.Status, &r.CreatedAtMs, &r.UpdatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return Region{}, ErrRegionNotFound
	}
	if err != nil {
		return Region{}, unavailable("read region", err)
	}
	return r, nil
}

func lockUser(ctx context.Context, q querier, app string, userID int64) (userRow, bool, error) {
	u := userRow{userID: userID}
	err := q.QueryRowContext(ctx, sqlLockUser, app, userID).
		Scan(&u.display, &u.country, &u.regionID, &u.source)
	if errors.Is(err, sql.ErrNoRows) {
		return u, false, nil
	}
	if err != nil {
		return u, false, unavailable("lock user", err)
	}
	return u, true, nil
}

func insertUser(ctx context.Context, q querier, app string, u userRow, nowMs int64) error {
	_, err := q.ExecContext(ctx, sqlInsertUser,
		app, u.userID, u.display, u.country, u.regionID, u.source, nowMs, nowMs)
	return userWriteError("insert user", err)
}

func updateUser(ctx context.Context, q querier, app string, u userRow, nowMs int64) error {
	_, err := q.ExecContext(ctx, sqlUpdateUser,
		u.display, u.country, u.regionID, u.source, nowMs, app, u.userID)
	return userWriteError("update user", err)
}

// userWriteError names display_user_id when it is the unique key that failed.
func userWriteError(op string, err error) error {
	if err == nil {
		return nil
	}
	if isDuplicateKey(err, "uk_users_display") {
		return alreadyExists("display_user_id", "is taken")
	}
	return unavailable(op, err)
}

// isDuplicateKey reports a duplicate entry of the named unique key. MariaDB
// names the key as is, MySQL 8 as table.key; both contain the name.
func isDuplicateKey(err error, key string) bool {
	return mysqldb.IsDuplicate(err) && strings.Contains(err.Error(), key)
}

type auditRow struct {
	userID      int64
	oldRegionID int64
	newRegionID int64
	source      string
	operator    string
	reason      string
}

// insertAuditSQL is the insert of n audit rows.
func insertAuditSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO user_region_audit (app_code, user_id, old_region_id, new_region_id, source, operator, reason, created_at_ms) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// insertAudit writes audit rows in one statement.
func insertAudit(ctx context.Context, q querier, app string, rows []auditRow, nowMs int64) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, len(rows)*8)
	for _, r := range rows {
		args = append(args, app, r.userID, r.oldRegionID, r.newRegionID, r.source, r.operator, r.reason, nowMs)
	}
	if _, err := q.ExecContext(ctx, insertAuditSQL(len(rows)), args...); err != nil {
		return unavailable("insert region audit", err)
	}
	return nil
}

func readAudit(ctx context.Context, q querier, app string, userID int64, limit int) ([]AuditEntry, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT id, old_region_id, new_region_id, source, operator, reason, created_at_ms
		FROM user_region_audit WHERE app_code = ? AND user_id = ?
		ORDER BY id DESC LIMIT ?`, app, userID, limit)
	if err != nil {
		return nil, unavailable("read region audit", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, &e.OldRegionID, &e.NewRegionID, &e.Source, &e.Operator, &e.Reason, &e.CreatedAtMs); err != nil {
			return nil, unavailable("read region audit", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("read region audit", err)
	}
	return out, nil
}

// regionCodeOf returns the code of a region of the app ("GLOBAL" for 0).
func regionCodeOf(ctx context.Context, q querier, app string, id int64) (string, error) {
	if id == 0 {
		return GlobalRegionCode, nil
	}
	var code string
	err := q.QueryRowContext(ctx, sqlRegionCode, app, id).Scan(&code)
	if errors.Is(err, sql.ErrNoRows) {
		// A user's region is never deleted (regions are only disabled);
		// answer GLOBAL's code rather than fail a profile read over it.
		return GlobalRegionCode, nil
	}
	if err != nil {
		return "", unavailable("read region code", err)
	}
	return code, nil
}

func readRegions(ctx context.Context, q querier, app string) ([]Region, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT region_id, region_code, name, status, created_at_ms, updated_at_ms
		FROM regions WHERE app_code = ? ORDER BY region_id`, app)
	if err != nil {
		return nil, unavailable("list regions", err)
	}
	defer rows.Close()
	var out []Region
	for rows.Next() {
		var r Region
		if err := rows.Scan(&r.ID, &r.Code, &r.Name, &r.Status, &r.CreatedAtMs, &r.UpdatedAtMs); err != nil {
			return nil, unavailable("list regions", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list regions", err)
	}
	return out, nil
}

func readCountries(ctx context.Context, q querier, app string) ([]Country, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT country_code, name, enabled, region_id, created_at_ms, updated_at_ms
		FROM countries WHERE app_code = ? ORDER BY country_code`, app)
	if err != nil {
		return nil, unavailable("list countries", err)
	}
	defer rows.Close()
	var out []Country
	for rows.Next() {
		var c Country
		if err := rows.Scan(&c.Code, &c.Name, &c.Enabled, &c.RegionID, &c.CreatedAtMs, &c.UpdatedAtMs); err != nil {
			return nil, unavailable("list countries", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list countries", err)
	}
	return out, nil
}

func readCountry(ctx context.Context, q querier, app, code string, forUpdate bool) (Country, error) {
	query := `SELECT country_code, name, enabled, region_id, created_at_ms, updated_at_ms
		FROM countries WHERE app_code = ? AND country_code = ?`
	if forUpdate {
		query += " FOR UPDATE"
	}
	var c Country
	err := q.QueryRowContext(ctx, query, app, code).Scan(&c.Code, &c.Name, &c.Enabled, &c.RegionID, &c.CreatedAtMs, &c.UpdatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return Country{}, ErrCountryNotFound
	}
	if err != nil {
		return Country{}, unavailable("read country", err)
	}
	return c, nil
}

// mappingSnapshot is an app's whole mapping, read with shared locks by each
// rebuild batch.
type mappingSnapshot struct {
	countries     map[string]countryMapping
	activeRegions map[int64]bool
}

func lockMappingSnapshot(ctx context.Context, tx *sql.Tx, app string) (mappingSnapshot, error) {
	m := mappingSnapshot{countries: map[string]countryMapping{}, activeRegions: map[int64]bool{}}
	codes := map[int64]string{}
	rows, err := tx.QueryContext(ctx, "SELECT region_id, region_code, status FROM regions WHERE app_code = ? LOCK IN SHARE MODE", app)
	if err != nil {
		return m, unavailable("lock regions", err)
	}
	for rows.Next() {
		var id int64
		var code, status string
		if err := rows.Scan(&id, &code, &status); err != nil {
			rows.Close()
			return m, unavailable("lock regions", err)
		}
		codes[id] = code
		m.activeRegions[id] = status == string(StatusActive)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return m, unavailable("lock regions", err)
	}
	rows, err = tx.QueryContext(ctx, "SELECT country_code, enabled, region_id FROM countries WHERE app_code = ? LOCK IN SHARE MODE", app)
	if err != nil {
		return m, unavailable("lock countries", err)
	}
	defer rows.Close()
	for rows.Next() {
		var code string
		c := countryMapping{found: true}
		if err := rows.Scan(&code, &c.enabled, &c.regionID); err != nil {
			return m, unavailable("lock countries", err)
		}
		c.regionActive = m.activeRegions[c.regionID]
		c.regionCode = codes[c.regionID]
		m.countries[code] = c
	}
	if err := rows.Err(); err != nil {
		return m, unavailable("lock countries", err)
	}
	return m, nil
}

// lockUserBatch reads and locks up to limit users after user id `after`, in
// user id order (the primary key), for a rebuild batch.
func lockUserBatch(ctx context.Context, tx *sql.Tx, app string, after int64, limit int) ([]userRow, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT user_id, display_user_id, country, region_id, region_source
		FROM users WHERE app_code = ? AND user_id > ?
		ORDER BY user_id LIMIT ? FOR UPDATE`, app, after, limit)
	if err != nil {
		return nil, unavailable("lock user batch", err)
	}
	defer rows.Close()
	var out []userRow
	for rows.Next() {
		var u userRow
		if err := rows.Scan(&u.userID, &u.display, &u.country, &u.regionID, &u.source); err != nil {
			return nil, unavailable("lock user batch", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("lock user batch", err)
	}
	return out, nil
}

func setUserRegion(ctx context.Context, tx *sql.Tx, app string, userID, regionID int64, source string, nowMs int64) error {
	if _, err := tx.ExecContext(ctx,
		"UPDATE users SET region_id = ?, region_source = ?, updated_at_ms = ? WHERE app_code = ? AND user_id = ?",
		regionID, source, nowMs, app, userID); err != nil {
		return unavailable(fmt.Sprintf("set region of user %d", userID), err)
	}
	return nil
}
