// Package testenv gives tests real dependencies, each isolated per test: a
// fresh MySQL database with the migrations applied (dropped on cleanup), a
// Redis key prefix (its keys deleted on cleanup), JetStream embedded in the
// test process, and a poll-until helper.
//
// Tests that need servers are skipped under -short. The servers are found
// through VOICEROOM_TEST_MYSQL_DSN (default "root:@tcp(127.0.0.1:3306)/") and
// VOICEROOM_TEST_REDIS_ADDR (default "127.0.0.1:6379"); deploy/services.sh
// starts them.
package testenv
