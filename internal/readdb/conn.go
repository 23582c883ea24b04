package readdb

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// connector opens the reads' connections: to a fit replica, round robin,
// else to the primary.
type connector struct{ r *Router }

var _ driver.Connector = (*connector)(nil)

// Connect tries the fit replicas from the next in turn; a replica that
// refuses is left out until its next check says otherwise. With none
// fit, or none answering, it connects to the primary.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	r := c.r
	if n := len(r.replicas); n > 0 {
		start := int(r.next.Add(1) % uint64(n))
		for i := range n {
			rep := r.replicas[(start+i)%n]
			if !rep.fit.Load() {
				continue
			}
			dc, err := rep.connector.Connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				r.setFit(rep, false, -1, fmt.Sprintf("connect: %v", err))
				continue
			}
			r.m.opened(rep.addr)
			return wrap(dc, rep.fit.Load)
		}
	}
	dc, err := r.primary.Connect(ctx)
	if err != nil {
		return nil, err
	}
	r.m.opened(primaryLabel)
	// A connection to the primary is given up once a replica is fit.
	return wrap(dc, func() bool { return !r.anyFit() })
}

// Driver returns the MySQL driver.
func (c *connector) Driver() driver.Driver { return c.r.primary.Driver() }

// fullConn is what the MySQL driver's connections implement and conn
// passes on.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
	driver.SessionResetter
	driver.Validator
}

// conn is a driver connection that the pool gives up (ErrBadConn on
// reuse, not valid on return) once keep says its server is no longer
// the one reads should go to.
type conn struct {
	fullConn
	keep func() bool
}

func wrap(dc driver.Conn, keep func() bool) (driver.Conn, error) {
	fc, ok := dc.(fullConn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("readdb: the driver's connection %T lacks an interface the pool relies on", dc)
	}
	return &conn{fullConn: fc, keep: keep}, nil
}

// ResetSession is called before the pool hands the connection out
// again: a connection to the wrong server is given up, and the pool
// opens another.
func (c *conn) ResetSession(ctx context.Context) error {
	if !c.keep() {
		return driver.ErrBadConn
	}
	return c.fullConn.ResetSession(ctx)
}

// IsValid is called when the connection goes back to the pool.
func (c *conn) IsValid() bool { return c.keep() && c.fullConn.IsValid() }
