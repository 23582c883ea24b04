package imbridge_test

import (
	"fmt"
	"testing"

	"voiceroom/imbridge"
)

func TestPermanentClassification(t *testing.T) {
	for code, want := range map[int]bool{
		10002: false, 10006: false, 60008: false, 91000: false, 70001: false, 12345: false,
		10003: true, 10004: true, 10007: true, 10015: true, 10017: true, 60002: true, 60006: true, 70009: true, 70020: true, 80001: true, 80002: true,
	} {
		if got := imbridge.Permanent(&imbridge.APIError{Code: code}); got != want {
			t.Errorf("code %d: permanent %v, want %v", code, got, want)
		}
	}
	if imbridge.Permanent(imbridge.ErrTransport) || imbridge.Permanent(imbridge.ErrMessageDropped) {
		t.Error("transport and dropped must be retryable")
	}
	if !imbridge.Permanent(fmt.Errorf("event e1: %w", imbridge.ErrBadEvent)) {
		t.Error("an unusable event must be permanent")
	}
}
