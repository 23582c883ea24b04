package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/valyala/fasthttp"
)

// ConsoleRoutes returns the Mount of the operators' console (package
// console): GET /console and GET and POST /console/*, answered by h. It
// binds api to this server's app: the console makes its calls through
// api, so that each passes the same authentication, rate limit, checks
// and error envelope as the same call from curl.
func ConsoleRoutes(h http.Handler, api *Loopback) Mount {
	return func(r Routers) {
		api.bind(r.app)
		fh := adaptor.HTTPHandler(h)
		r.Public.Get("/console", fh)
		r.Public.Get("/console/*", fh)
		r.Public.Post("/console/*", fh)
	}
}

// loopbackAddr is the remote address of the console's in-process calls.
var loopbackAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// Loopback is an http.RoundTripper over a server's own Fiber app: a
// request runs through the app's middleware and routes in the calling
// goroutine, with no socket. ConsoleRoutes binds it; the routes must be
// final before its first call.
type Loopback struct {
	mu      sync.Mutex
	app     *fiber.App
	handler fasthttp.RequestHandler
}

// NewLoopback returns a Loopback that ConsoleRoutes binds.
func NewLoopback() *Loopback { return &Loopback{} }

func (l *Loopback) bind(app *fiber.App) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.app, l.handler = app, nil
}

// handle is the app's handler, taken at the first call (once every
// route is mounted), or nil before ConsoleRoutes has run.
func (l *Loopback) handle() fasthttp.RequestHandler {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handler == nil && l.app != nil {
		l.handler = l.app.Handler()
	}
	return l.handler
}

// RoundTrip answers req with the app. It reads req's body whole (the
// app's body limit applies as on the listener) and fails only when that
// read fails or the Loopback is not bound yet.
func (l *Loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	handler := l.handle()
	if handler == nil {
		return nil, errors.New("loopback: not mounted")
	}
	var in fasthttp.Request
	in.Header.SetMethod(req.Method)
	in.SetRequestURI(req.URL.RequestURI())
	in.Header.SetHost("loopback")
	for k, vs := range req.Header {
		for _, v := range vs {
			in.Header.Add(k, v)
		}
	}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("loopback %s %s: read body: %w", req.Method, req.URL.Path, err)
		}
		in.SetBody(body)
	}
	var fctx fasthttp.RequestCtx
	fctx.Init(&in, loopbackAddr, nil)
	handler(&fctx)

	out := &http.Response{
		Status:     http.StatusText(fctx.Response.StatusCode()),
		StatusCode: fctx.Response.StatusCode(),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{},
		Body:    io.NopCloser(bytes.NewReader(bytes.Clone(fctx.Response.Body()))),
		Request: req,
	}
	fctx.Response.Header.VisitAll(func(k, v []byte) { out.Header.Add(string(k), string(v)) })
	out.ContentLength = int64(len(fctx.Response.Body()))
	return out, nil
}
