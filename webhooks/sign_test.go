package webhooks_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"voiceroom/webhooks"
)

// The example of the Standard Webhooks specification: a receiver using
// that standard's libraries verifies what the sink signs.
const (
	stdSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stdID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	stdTimestamp = 1614265330
	stdPayload   = `{"test": 2432232314}`
	stdSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func stdKey(t *testing.T) []byte {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(stdSecret, webhooks.SecretPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSignatureIsStandardWebhooks: the sink's signature of the
// specification's example is the specification's, and the README's
// verify accepts it, refuses it stale, tampered, or with another secret.
func TestSignatureIsStandardWebhooks(t *testing.T) {
	key := stdKey(t)
	if got := webhooks.Signature([][]byte{key}, stdID, stdTimestamp, []byte(stdPayload)); got != stdSignature {
		t.Fatalf("signature %q, want the specification's %q", got, stdSignature)
	}
	h := http.Header{}
	h.Set("webhook-id", stdID)
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", stdSignature)
	at := time.Unix(stdTimestamp, 0)
	if err := verify(stdSecret, h, []byte(stdPayload), at.Add(4*time.Minute)); err != nil {
		t.Errorf("verify refused the specification's example: %v", err)
	}
	if err := verify(stdSecret, h, []byte(stdPayload), at.Add(6*time.Minute)); err == nil {
		t.Error("verify accepted a delivery 6 minutes old (a replay)")
	}
	if err := verify(stdSecret, h, []byte(`{"test": 2432232315}`), at); err == nil {
		t.Error("verify accepted a tampered body")
	}
	other := webhooks.SecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, 32))
	if err := verify(other, h, []byte(stdPayload), at); err == nil {
		t.Error("verify accepted another secret's signature")
	}
	// Two signatures (a rotation): either secret verifies.
	both := webhooks.Signature([][]byte{make([]byte, 32), key}, stdID, stdTimestamp, []byte(stdPayload))
	if !strings.HasSuffix(both, " "+stdSignature) {
		t.Fatalf("two signatures %q: want the second to be %q", both, stdSignature)
	}
	h.Set("webhook-signature", both)
	for _, s := range []string{stdSecret, other} {
		if err := verify(s, h, []byte(stdPayload), at); err != nil {
			t.Errorf("verify with %s refused a delivery signed with both: %v", s[:10], err)
		}
	}
}

// TestVerifySnippetInDocs: the webhooks page's verification code
// (docs/webhooks.md) is the
// function the tests' receivers verify every delivery with.
func TestVerifySnippetInDocs(t *testing.T) {
	src, err := os.ReadFile("verify_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "// readme:verify:begin\n")
	fn, _, _ = strings.Cut(fn, "// readme:verify:end")
	fn = strings.TrimSpace(fn)
	readme, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), fn) {
		t.Errorf("docs/webhooks.md does not hold the verify function of verify_example_test.go verbatim:\n%s", fn)
	}
}

// TestVerifyAgreesWithDocs: the package's Verify and the webhooks page's check
// accept and refuse the same deliveries.
func TestVerifyAgreesWithDocs(t *testing.T) {
	at := time.Unix(stdTimestamp, 0)
	good := http.Header{}
	good.Set("webhook-id", stdID)
	good.Set("webhook-timestamp", "1614265330")
	good.Set("webhook-signature", "v1,bm90IGl0 "+stdSignature)
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		now  time.Time
	}{
		{"good", good, stdPayload, at},
		{"tampered", good, stdPayload + " ", at},
		{"stale", good, stdPayload, at.Add(10 * time.Minute)},
		{"early", good, stdPayload, at.Add(-10 * time.Minute)},
		{"unsigned", http.Header{"Webhook-Id": {stdID}, "Webhook-Timestamp": {"1614265330"}}, stdPayload, at},
	} {
		readme := verify(stdSecret, tc.h, []byte(tc.body), tc.now) == nil
		pkg := webhooks.Verify(stdSecret, tc.h, []byte(tc.body), tc.now, 5*time.Minute) == nil
		if readme != pkg || readme != (tc.name == "good") {
			t.Errorf("%s: docs verify %v, package Verify %v", tc.name, readme, pkg)
		}
	}
}
