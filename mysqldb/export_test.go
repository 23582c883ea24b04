package mysqldb

// MigrationLock exposes migrationLock to the tests.
var MigrationLock = migrationLock
