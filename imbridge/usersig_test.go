package imbridge

import "testing"

func TestUserSigVector(t *testing.T) {
	const key = "8e1b3b4bfc0ed2a4c8d2f3e0a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
	if got, want := sigHMAC(key, "administrator", 1400000001, 1700000000, 86400), "a6sFj/3T2OnRuRdxX40HhQgRk+QrGtkmfQz3AIxWyoA="; got != want {
		t.Fatalf("TLS.sig = %s, want %s", got, want)
	}
}

func TestCheckUserSig(t *testing.T) {
	const key, admin, app = "k1", "administrator", int64(1400000001)
	sig, err := UserSig(key, admin, app, 1700000000, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, identifier string
		app, now              int64
		want                  int
	}{
		{"good", key, admin, app, 1700000100, 0},
		{"wrong key", "k2", admin, app, 1700000100, CodeSigBadKey},
		{"expired", key, admin, app, 1700003601, CodeSigExpired},
		{"wrong identifier", key, "someone", app, 1700000100, CodeSigIdentifier},
		{"wrong sdkappid", key, admin, 1400000002, 1700000100, CodeSigSDKAppID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckUserSig(sig, tc.key, tc.identifier, tc.app, tc.now); got != tc.want {
				t.Fatalf("CheckUserSig = %d, want %d", got, tc.want)
			}
		})
	}
	if got := CheckUserSig("%%%", key, admin, app, 1700000100); got != CodeSigInvalid {
		t.Fatalf("garbage sig = %d, want %d", got, CodeSigInvalid)
	}
}
