// Package readdb routes the reads that tolerate lag to MySQL (or MariaDB)
// read replicas, and falls back to the primary when no replica is fit.
//
// A [Router] hands out one *sql.DB for those reads ([Router.DB]). Each of
// its connections goes, when it is opened, to a fit replica (round robin
// over them), else to the primary. A replica is fit while its lag check
// succeeds: it answers, it replicates (Seconds_Behind_Master, or
// Seconds_Behind_Source, is not NULL: both replication threads run) and
// its lag is at most Config.MaxLag. [Router.Run] checks every replica each
// Config.CheckInterval; a replica that refuses a new connection is left
// out at once, without waiting for the next check.
//
// A connection is kept only while its server is still the right one: a
// connection to a replica that became unfit, or to the primary while a
// replica is fit again, is closed when it goes back to the pool or is
// taken from it, and the next query opens one to the right server. So,
// within one check interval of a replica falling behind, stopping or
// coming back, reads follow. A query already running on a replica that
// goes away fails, as any query on a server that goes away does.
//
// What may read from the replicas is the caller's choice, made where the
// pools are wired (cmd/voiceroom): lists, ranks, boards and operators'
// listings, never a command, the outbox, its relay, recovery, or a read
// that must see the caller's own write. A replica's data is seconds old at
// worst (MaxLag plus one check interval), and two reads in a row may go
// to two replicas of different lags.
//
// Metrics: voiceroom_mysql_replica_lag_seconds{replica} (-1 while the lag
// is unknown: the replica is unreachable or not replicating),
// voiceroom_mysql_replica_fit{replica} and
// voiceroom_mysql_read_connections_total{server} (the connections opened
// for reads, by server: a replica's address, or "primary"). A replica is
// named by its address (host:port, or a socket's path), never by its DSN.
package readdb
