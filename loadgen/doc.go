// Package loadgen drives a running voiceroom over real HTTP and measures
// what a user of the whole stack meets: per-command throughput and latency,
// how long a committed event takes to reach the stream, the IM emulator and
// the room list, the relay's drain rate on a backlog, memory, CPU per 1,000
// commands for voiceroom and MariaDB, and MySQL work per command; and,
// in the same run, the ceilings every figure can be read against (a
// two-insert MySQL transaction, JetStream async publish, the HTTP stack's
// plainest route).
//
// Guarantees: a run is repeatable for a given Config.Seed (the same users,
// rooms and choice sequence per client; timing still varies); it writes only
// to its own apps (Config.Apps, and DrainApp for the backlog), never to
// others; it measures commit times from MySQL's own record (room_outbox
// created_at_ms) and stream times from JetStream's stored timestamps, so a
// latency it reports is never shorter than the real one. A part that needs
// a feature the target lacks (the room list, the IM emulator) reports "n/a"
// with the reason, and the rest of the run goes on.
//
// Failure: setup errors (seeding, creating rooms, an unreachable target) end
// the run with an error; errors of commands under load are counted by code,
// never fatal.
//
// Mechanics: Bench.Run seeds K regions and U users per app directly in
// MySQL, creates the gift and credits coins through the admin API, creates R
// rooms over HTTP, measures the ceilings while the stack is quiet, then runs
// C closed-loop clients (or, with Rate > 0, an open-loop arrival schedule
// whose latency counts from the scheduled start, so a slow server cannot hide
// queueing) plus list readers and a list-visibility probe for Duration,
// printing a progress line each second. It then waits for the outbox to
// drain, reads the stream's timestamps, and measures the relay on a backlog
// of DrainRows outbox rows of its own app.
package loadgen
