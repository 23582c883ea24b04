package imemu

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// An emulator given Config.ProofKey proves it holds that key: GET
// /_emu/proof?nonce=N answers {"mac": hex(HMAC-SHA256(key, proofLabel+N))}.
// Whoever handed the emulator the key (deploy/run.sh generates one per
// run) sends a fresh random nonce and compares: a stranger on the port
// cannot answer, and an answer seen once is no use with the next nonce.
// The check never sends the key or anything an IM credential is made of.
const (
	// proofLabel separates the proof's MACs from any other use of a key.
	proofLabel = "voiceroom imemu proof v1\n"
	// MinProofKey is the shortest key accepted, in bytes.
	MinProofKey = 16
	// nonceBytes is the verifier's nonce, before hex.
	nonceBytes = 32
	// maxNonce bounds the nonce the emulator MACs (hex characters).
	maxNonce = 128
	// maxProofReply bounds what Verify reads of an answer.
	maxProofReply = 4096
)

// ErrNotProved is returned by Verify when what answers is not an emulator
// holding the key: it answered without a proof, with a wrong one, or with
// something else than the proof route's answer.
var ErrNotProved = errors.New("not the emulator holding the key")

// ProofMAC is the answer an emulator holding key gives to nonce.
func ProofMAC(key []byte, nonce string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(proofLabel))
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

type proofReply struct {
	MAC string `json:"mac"`
}

func (e *Emulator) serveProof(w http.ResponseWriter, r *http.Request) {
	if len(e.proofKey) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "this emulator was given no proof key"})
		return
	}
	nonce := r.URL.Query().Get("nonce")
	if nonce == "" || len(nonce) > maxNonce {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("nonce: want 1..%d characters", maxNonce)})
		return
	}
	writeJSON(w, http.StatusOK, proofReply{MAC: ProofMAC(e.proofKey, nonce)})
}

// Verify asks the server at baseURL (an http:// or https:// base, as
// imbridge's Domain) to prove it is an emulator holding key, with a fresh
// nonce, and returns nil only when it does. It follows no redirect. It
// returns an error wrapping ErrNotProved when something answered without
// the proof, and another error (no answer, a bad key or URL) otherwise.
func Verify(ctx context.Context, client *http.Client, baseURL string, key []byte) error {
	if len(key) < MinProofKey {
		return fmt.Errorf("proof key: %d bytes, want at least %d", len(key), MinProofKey)
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("emulator URL %q: want an http(s) URL", baseURL)
	}
	nb := make([]byte, nonceBytes)
	if _, err := rand.Read(nb); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	nonce := hex.EncodeToString(nb)
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimRight(baseURL, "/")+"/_emu/proof?nonce="+nonce, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProofReply))
	if err != nil {
		return fmt.Errorf("read the proof: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET /_emu/proof answered HTTP %d", ErrNotProved, resp.StatusCode)
	}
	var p proofReply
	if err := json.Unmarshal(body, &p); err != nil || p.MAC == "" {
		return fmt.Errorf("%w: GET /_emu/proof answered no proof", ErrNotProved)
	}
	if !hmac.Equal([]byte(p.MAC), []byte(ProofMAC(key, nonce))) {
		return fmt.Errorf("%w: its proof does not match this key", ErrNotProved)
	}
	return nil
}
