package gateway

import (
	"bytes"
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
// console): GET /console and GET and POST /console/*, answered by the
// handler newHandler makes. newHandler gets a RoundTripper that answers
// requests with this server's own routes, in process (see loopback): every
// call the console makes passes the same authentication, rate limit,
// checks and error envelope as the same call from curl.
func ConsoleRoutes(newHandler func(api http.RoundTripper) http.Handler) Mount {
	return func(r Routers) {
		h := adaptor.HTTPHandler(newHandler(&loopback{app: r.app}))
		r.Public.Get("/console", h)
		r.Public.Get("/console/*", h)
		r.Public.Post("/console/*", h)
	}
}

// loopbackAddr is the remote address of the console's in-process calls.
var loopbackAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// loopback is an http.RoundTripper over a Fiber app's handler: the request
// runs through the app's middleware and routes in the calling goroutine,
// with no socket. It serves the console only; the app's routes must be
// final before the first call.
type loopback struct {
	app     *fiber.App
	handler fasthttp.RequestHandler
	once    sync.Once
}

// RoundTrip answers req with the app. It reads req's body whole (the
// app's body limit applies as on the listener) and fails only when that
// read fails.
func (l *loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	l.once.Do(func() { l.handler = l.app.Handler() })
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
	l.handler(&fctx)

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
