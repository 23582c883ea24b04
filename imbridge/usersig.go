package imbridge

import (
	"bytes"
	"compress/zlib"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// sigEscaper and sigUnescaper map standard base64 to Tencent's URL-safe
// variant and back.
var (
	sigEscaper   = strings.NewReplacer("+", "*", "/", "-", "=", "_")
	sigUnescaper = strings.NewReplacer("*", "+", "-", "/", "_", "=")
)

// sigHMAC is TLS.sig: standard base64 of HMAC-SHA256 over the fields.
func sigHMAC(secretKey, identifier string, sdkAppID, issuedAt, expire int64) string {
	mac := hmac.New(sha256.New, []byte(secretKey))
	fmt.Fprintf(mac, "TLS.identifier:%s\nTLS.sdkappid:%d\nTLS.time:%d\nTLS.expire:%d\n", identifier, sdkAppID, issuedAt, expire)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// userSigDoc is the JSON inside a UserSig v2.
type userSigDoc struct {
	Ver        string `json:"TLS.ver"`
	Identifier string `json:"TLS.identifier"`
	SDKAppID   int64  `json:"TLS.sdkappid"`
	Expire     int64  `json:"TLS.expire"`
	Time       int64  `json:"TLS.time"`
	Sig        string `json:"TLS.sig"`
}

// UserSig makes a Tencent UserSig v2 for identifier, valid from issuedAt
// (Unix seconds) for expire seconds: the HMAC, the JSON document,
// zlib, then base64 with + / = replaced by * - _.
func UserSig(secretKey, identifier string, sdkAppID, issuedAt, expire int64) (string, error) {
	doc, err := json.Marshal(userSigDoc{
		Ver: "2.0", Identifier: identifier, SDKAppID: sdkAppID, Expire: expire, Time: issuedAt,
		Sig: sigHMAC(secretKey, identifier, sdkAppID, issuedAt, expire),
	})
	if err != nil {
		return "", fmt.Errorf("encode usersig: %w", err)
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(doc); err != nil {
		return "", fmt.Errorf("compress usersig: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compress usersig: %w", err)
	}
	return sigEscaper.Replace(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}

// CheckUserSig verifies sig the way Tencent does for a REST call by
// identifier to sdkAppID at nowUnix, and returns the matching error code
// (0 when the sig is good). The bridge only signs; the emulator (package
// imemu) checks with this, so both sides share one reading of the format.
func CheckUserSig(sig, secretKey, identifier string, sdkAppID, nowUnix int64) int {
	if sig == "" {
		return CodeSigEmpty
	}
	raw, err := base64.StdEncoding.DecodeString(sigUnescaper.Replace(sig))
	if err != nil {
		return CodeSigInvalid
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return CodeSigInvalid
	}
	doc, err := io.ReadAll(io.LimitReader(zr, 4096))
	if err != nil {
		return CodeSigInvalid
	}
	var d userSigDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return CodeSigInvalid
	}
	switch {
	case d.Identifier != identifier:
		return CodeSigIdentifier
	case d.SDKAppID != sdkAppID:
		return CodeSigSDKAppID
	case !hmac.Equal([]byte(d.Sig), []byte(sigHMAC(secretKey, d.Identifier, d.SDKAppID, d.Time, d.Expire))):
		return CodeSigBadKey
	case d.Time+d.Expire < nowUnix:
		return CodeSigExpired
	}
	return 0
}
