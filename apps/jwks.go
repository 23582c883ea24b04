package apps

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"

	"voiceroom/authtoken"
)

// providerID is an app's identity provider as configured: a change of any
// part makes a new provider.
type providerID struct {
	app string
	JWKS
}

// provider is an identity provider and the key set it keeps fetched
// (package keyfunc over jwkset: fetched at start, every JWKS.Refresh, and
// on a kid it does not hold, at most once per JWKS.UnknownKID; a failed
// fetch keeps the keys fetched before; a fetch that changes the key ids
// moves the registry's generation).
type provider struct {
	p    *authtoken.Provider
	stop context.CancelFunc
}

// setProviders makes the snapshot's providers: those already running are
// kept, new ones start (their first fetch is bounded by JWKS.Timeout;
// one that fails starts empty and tries again), and those no longer
// configured stop. A provider at an http:// URL the configuration does
// not allow is left out, loudly.
func (r *Registry) setProviders(s *snapshot, ids []providerID) {
	keep := map[providerID]bool{}
	for _, id := range ids {
		p := r.providers[id]
		if p == nil {
			var err error
			if p, err = r.newProvider(id); err != nil {
				r.log.Error("apps: identity provider not used", "app_code", id.app, "jwks_url", id.URL, "error", err)
				continue
			}
			r.providers[id] = p
			r.metrics.jwksFailures.WithLabelValues(id.app)
		}
		keep[id] = true
		s.providers[id.Issuer] = append(s.providers[id.Issuer], p.p)
	}
	for id, p := range r.providers {
		if !keep[id] {
			p.stop()
			delete(r.providers, id)
		}
	}
}

func (r *Registry) newProvider(id providerID) (*provider, error) {
	cfg := r.cfg.JWKS
	if err := checkJWKS(id.JWKS, cfg.AllowHTTP); err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	client = &http.Client{Transport: limitedBody{rt: client.Transport, max: cfg.MaxBytes}, Timeout: client.Timeout,
		CheckRedirect: client.CheckRedirect, Jar: client.Jar}
	ctx, stop := context.WithCancel(r.base)
	failed := func(_ context.Context, err error) {
		r.metrics.jwksFailures.WithLabelValues(id.app).Inc()
		r.log.Warn("apps: identity provider's key set not fetched; keeping the keys fetched before", "app_code", id.app, "jwks_url", id.URL, "error", err)
	}
	// The building blocks of keyfunc.NewDefaultOverrideCtx, with a storage
	// that tells when the key set changes.
	store, err := jwkset.NewStorageFromHTTP(id.URL, jwkset.HTTPClientStorageOptions{
		Client:                    client,
		Ctx:                       ctx,
		HTTPTimeout:               cfg.Timeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler:       failed,
		RefreshInterval:           cfg.Refresh,
		Storage:                   &watchedKeys{Storage: jwkset.NewMemoryStorage(), changed: func() { r.gen.Add(1) }},
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("key set %s: %w", id.URL, err)
	}
	set, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{id.URL: store},
		RefreshUnknownKID: rate.NewLimiter(rate.Every(cfg.UnknownKID), 1),
		// A request waits this long at most for a fetch on an unknown
		// kid (the fetch shares the bound); when the next fetch is
		// further off, the kid is unknown at once.
		RateLimitWaitMax: cfg.Timeout,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("key set %s: %w", id.URL, err)
	}
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: set})
	if err != nil {
		stop()
		return nil, fmt.Errorf("key set %s: %w", id.URL, err)
	}
	return &provider{
		p: &authtoken.Provider{AppCode: id.app, Issuer: id.Issuer, Audience: id.Audience, AppClaim: id.AppClaim,
			Keyfunc: kf.KeyfuncCtx},
		stop: stop,
	}, nil
}

// watchedKeys is a key set's storage that calls changed when a fetch
// replaces its keys with another set of ids (a key added or dropped):
// cached verdicts on tokens of a dropped key must end.
type watchedKeys struct {
	jwkset.Storage
	changed func()
}

func (w *watchedKeys) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	before, err := w.KeyReadAll(ctx)
	if err != nil {
		return err
	}
	if err := w.Storage.KeyReplaceAll(ctx, given); err != nil {
		return err
	}
	if !sameIDs(before, given) {
		w.changed()
	}
	return nil
}

// sameIDs reports whether two key sets hold the same key ids.
func sameIDs(a, b []jwkset.JWK) bool {
	if len(a) != len(b) {
		return false
	}
	ids := map[string]bool{}
	for _, k := range a {
		ids[k.Marshal().KID] = true
	}
	for _, k := range b {
		if !ids[k.Marshal().KID] {
			return false
		}
	}
	return true
}

// limitedBody bounds the answers of a key set's URL: a body past max
// fails to decode, and the keys fetched before stay.
type limitedBody struct {
	rt  http.RoundTripper
	max int64
}

func (l limitedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	rt := l.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, l.max), resp.Body}
	return resp, nil
}
