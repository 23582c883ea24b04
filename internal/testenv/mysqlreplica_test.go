package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// A MariaDB server deletes every "#sql" file in its temporary directory
// when it starts. A replica started with the shared one's directory
// (/tmp) deleted the temporary tables of statements running on the
// shared server meanwhile, which then failed ("Error on delete of
// '/tmp/#sql-temptable-….MAI'"): the backup drill did, in CI.
func TestReplicaLeavesOthersTemporaryFiles(t *testing.T) {
	other := filepath.Join(os.TempDir(), "#sql-temptable-voiceroom-"+dbName(t.Name())+".MAI")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(other) })
	RunMySQLReplica(t)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another server's temporary table after a replica started: %v", err)
	}
}
