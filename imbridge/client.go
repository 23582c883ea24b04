package imbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"voiceroom/apperr"
)

// Tencent IM REST APIs the bridge calls ("service/command").
const (
	APICreateGroup  = "group_open_http_svc/create_group"
	APISendGroupMsg = "group_open_http_svc/send_group_msg"
	APIDestroyGroup = "group_open_http_svc/destroy_group"
	// APIForbidSendMsg mutes and unmutes members' messages in a group.
	APIForbidSendMsg = "group_open_http_svc/forbid_send_msg"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// CallTimeout bounds one REST call, connection included. Default 3s.
	CallTimeout time.Duration
	// SigTTL is the life of the UserSigs the client makes. Default 24h.
	SigTTL time.Duration
	// SigRenewBefore renews a cached sig this long before it expires.
	// Default 1h.
	SigRenewBefore time.Duration
	// MaxIdleConns is the keep-alive pool size per application. Default 64.
	MaxIdleConns int
}

// WithDefaults returns c with zero fields defaulted.
func (c ClientConfig) WithDefaults() ClientConfig {
	if c.CallTimeout == 0 {
		c.CallTimeout = 3 * time.Second
	}
	if c.SigTTL == 0 {
		c.SigTTL = 24 * time.Hour
	}
	if c.SigRenewBefore == 0 {
		c.SigRenewBefore = time.Hour
	}
	if c.MaxIdleConns == 0 {
		c.MaxIdleConns = 64
	}
	return c
}

// Validate checks c after defaults; it never changes c. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c ClientConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.CallTimeout < 100*time.Millisecond || c.CallTimeout > time.Minute:
		return apperr.BadConfig("CallTimeout", "%w: call timeout %s: want 100ms..1m", ErrInvalidConfig, c.CallTimeout)
	case c.SigTTL < time.Minute:
		return apperr.BadConfig("SigTTL", "%w: sig ttl %s: want at least 1m", ErrInvalidConfig, c.SigTTL)
	case c.SigRenewBefore < 0 || c.SigRenewBefore >= c.SigTTL:
		return apperr.BadConfig("SigRenewBefore", "%w: sig renew before %s: want 0..sig ttl", ErrInvalidConfig, c.SigRenewBefore)
	case c.MaxIdleConns < 1:
		return apperr.BadConfig("MaxIdleConns", "%w: max idle conns %d: must be at least 1", ErrInvalidConfig, c.MaxIdleConns)
	}
	return nil
}

// Client calls one Tencent IM application's REST API as its admin. It is
// safe for concurrent use.
type Client struct {
	app  Application
	cfg  ClientConfig
	http *http.Client
	now  func() time.Time

	mu        sync.Mutex
	sig       string
	sigExpiry time.Time
}

// NewClient returns a Client of app with its own keep-alive pool.
func NewClient(app Application, cfg ClientConfig, now func() time.Time) (*Client, error) {
	if err := app.Validate(); err != nil {
		return nil, fmt.Errorf("%w: application: %w", ErrInvalidConfig, err)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = cfg.MaxIdleConns
	tr.MaxIdleConnsPerHost = cfg.MaxIdleConns
	tr.IdleConnTimeout = 90 * time.Second
	return &Client{app: app, cfg: cfg, http: &http.Client{Transport: tr}, now: now}, nil
}

// Application returns the client's application.
func (c *Client) Application() Application { return c.app }

// Close drops the idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// userSig returns the cached sig, making a new one when it is near expiry.
func (c *Client) userSig() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.sig != "" && now.Before(c.sigExpiry.Add(-c.cfg.SigRenewBefore)) {
		return c.sig, nil
	}
	ttl := int64(c.cfg.SigTTL / time.Second)
	sig, err := UserSig(c.app.SecretKey, c.app.Admin, c.app.SDKAppID, now.Unix(), ttl)
	if err != nil {
		return "", err
	}
	c.sig, c.sigExpiry = sig, now.Add(c.cfg.SigTTL)
	return sig, nil
}

// renewSig forgets the cached sig (after 70001).
func (c *Client) renewSig() {
	c.mu.Lock()
	c.sig = ""
	c.mu.Unlock()
}

// baseResponse is what every Tencent answer carries.
type baseResponse struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorCode    int    `json:"ErrorCode"`
	ErrorInfo    string `json:"ErrorInfo"`
}

// maxResponseBytes bounds what is read of an answer.
const maxResponseBytes = 1 << 20

// Call posts req (JSON; nil sends {}) to api ("service/command") and
// decodes the answer into resp (may be nil). An answer with a non-zero
// ErrorCode is an *APIError; no answer (transport, timeout, HTTP status
// other than 200) wraps ErrTransport. An expired sig (70001) is renewed
// and the call made once more.
func (c *Client) Call(ctx context.Context, api string, req, resp any) error {
	err := c.call(ctx, api, req, resp)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeSigExpired {
		c.renewSig()
		err = c.call(ctx, api, req, resp)
	}
	return err
}

func (c *Client) call(ctx context.Context, api string, req, resp any) error {
	body := []byte("{}")
	if req != nil {
		var err error
		if raw, ok := req.([]byte); ok {
			body = raw
		} else if body, err = json.Marshal(req); err != nil {
			return fmt.Errorf("encode %s: %w", api, err)
		}
	}
	sig, err := c.userSig()
	if err != nil {
		return err
	}
	q := url.Values{}
	q.Set("sdkappid", strconv.FormatInt(c.app.SDKAppID, 10))
	q.Set("identifier", c.app.Admin)
	q.Set("usersig", sig)
	q.Set("random", strconv.FormatUint(uint64(rand.Uint32()), 10))
	q.Set("contenttype", "json")
	u := c.app.domain() + "/v4/" + api + "?" + q.Encode()

	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %s: build request", ErrTransport, api) // the URL holds the sig: never echo it
	}
	hreq.Header.Set("Content-Type", "application/json")
	hres, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTransport, api, redactURLError(err))
	}
	defer hres.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hres.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%w: %s: read answer: %w", ErrTransport, api, redactURLError(err))
	}
	if hres.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: http status %d", ErrTransport, api, hres.StatusCode)
	}
	var base baseResponse
	if err := json.Unmarshal(data, &base); err != nil {
		return fmt.Errorf("%w: %s: undecodable answer", ErrTransport, api)
	}
	if base.ErrorCode != 0 {
		info := base.ErrorInfo
		if len(info) > 200 {
			info = info[:200]
		}
		return &APIError{API: api, Code: base.ErrorCode, Info: info}
	}
	if resp != nil {
		if err := json.Unmarshal(data, resp); err != nil {
			return fmt.Errorf("%w: %s: undecodable answer", ErrTransport, api)
		}
	}
	return nil
}

// redactURLError drops the URL (which carries the usersig) from a
// *url.Error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
