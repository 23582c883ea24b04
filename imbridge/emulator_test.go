package imbridge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"voiceroom/imbridge"
)

// TestEmulatorChecksSigs: the emulator accepts a good sig and answers a
// wrong key, an expired sig and a wrong identifier with their 700xx codes.
func TestEmulatorChecksSigs(t *testing.T) {
	_, url := newTestEmulator(t)
	good := imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey, Domain: url}
	create := map[string]any{"Type": "AVChatRoom", "GroupId": "g1", "Name": "n"}
	for _, tc := range []struct {
		name string
		app  imbridge.Application
		now  time.Time
		want int
	}{
		{"good", good, time.Now(), 0},
		{"wrong key", imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: "other", Domain: url}, time.Now(), imbridge.CodeSigBadKey},
		{"expired", good, time.Now().Add(-48 * time.Hour), imbridge.CodeSigExpired},
		{"wrong identifier", imbridge.Application{SDKAppID: testSDKAppID, Admin: "someone", SecretKey: testKey, Domain: url}, time.Now(), imbridge.CodeSigIdentifier},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			c, err := imbridge.NewClient(tc.app, imbridge.ClientConfig{}, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			create["GroupId"] = "g-" + tc.name[:4]
			err = c.Call(context.Background(), imbridge.APICreateGroup, create, nil)
			var ae *imbridge.APIError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("call: %v", err)
			case tc.want != 0 && (!errors.As(err, &ae) || ae.Code != tc.want):
				t.Fatalf("call: %v, want code %d", err, tc.want)
			case tc.want != 0 && !imbridge.Permanent(err) && tc.want != imbridge.CodeSigExpired:
				t.Fatalf("%v should be permanent", err)
			}
		})
	}
}

func TestPermanentClassification(t *testing.T) {
	for code, want := range map[int]bool{
		10002: false, 10006: false, 60008: false, 91000: false, 70001: false, 12345: false,
		10003: true, 10004: true, 60002: true, 60006: true, 70009: true, 70020: true, 80001: true, 80002: true,
	} {
		if got := imbridge.Permanent(&imbridge.APIError{Code: code}); got != want {
			t.Errorf("code %d: permanent %v, want %v", code, got, want)
		}
	}
	if imbridge.Permanent(imbridge.ErrTransport) || imbridge.Permanent(imbridge.ErrMessageDropped) {
		t.Error("transport and dropped must be retryable")
	}
}
