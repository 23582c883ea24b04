// Package testenv gives tests real dependencies, each isolated per test: a
// fresh MySQL database with the migrations applied (dropped on cleanup), a
// Redis key prefix (its keys deleted on cleanup), JetStream embedded in the
// test process, and a poll-until helper.
//
// It is the one home of the shared test helpers; a package's own
// _test.go files keep only what is specific to it:
//
//   - NewDB, NewDBWithDSN: a database of the test's own (cmd/voiceroom's
//     process tests pass its DSN to the binary);
//   - NewSourceDB: NewDBWithDSN on the MariaDB source deploy/services.sh
//     starts for the replica tests (binary log on); RunMySQLReplica: a
//     replica of that source of the test's own, which it can Stop and
//     Start (and WaitFor to catch up);
//   - NewRedis: a key prefix of the test's own, on the single Redis or
//     (VOICEROOM_TEST_REDIS_ADDRS) a cluster or Sentinel, every script
//     and transaction checked to stay in one cluster slot (CheckSlots);
//     NewRedisCluster: the shared test cluster services.sh starts;
//     RunRedis: a redis-server of the test's own, which it can Stop and
//     Start; RunRedisCluster, RunRedisSentinel: a cluster (a replica per
//     master) or a Sentinel setup of the test's own, whose nodes it can
//     stop;
//   - NewJetStream, RunJetStream, NewJetStreamServer: an embedded JetStream
//     (RunJetStream can Stop and Start it); NewPublisher publishes to it,
//     ConnectJetStream is a plain nats.go client of any server;
//   - outbox rows and stream contents (outbox.go): InsertOutbox writes rows
//     as a room command does, OutboxState and OutboxCount read them back,
//     StreamMessages, StreamCount and StreamLen read ROOM_EVENTS;
//   - Scalar: the one value of a one-row query, its error checked;
//   - Eventually: wait for a condition, never a bare sleep;
//   - Logger (through tb.Log) and LogBuffer (logs a test reads back);
//   - Clock: a clock the test moves;
//   - Metric, MustMetric, MetricValue: one series of a registry;
//   - Golden: a wire format pinned under testdata/ (-update rewrites);
//   - Fetch: one HTTP request to a server on a real socket, its answer read;
//   - NewIdentityProvider: an app's identity provider, its JWKS on
//     loopback (rotated, taken down), signing RS256/ES256 tokens;
//   - ports: see ClosedAddr;
//   - Start: a component's Run for the length of the test;
//   - EnvInt, Percentile, Millis: a benchmark's workload and figures.
//
// Tests that need servers are skipped under -short. The servers are found
// through VOICEROOM_TEST_MYSQL_DSN (default "root:@tcp(127.0.0.1:3306)/") and
// VOICEROOM_TEST_REDIS_ADDR (default "127.0.0.1:6379"); deploy/services.sh
// starts them.
package testenv
