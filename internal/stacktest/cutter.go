package stacktest

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Cutter is a ZooKeeper Dialer (zkgroup.Config.Dialer) whose connections a
// test can cut and keep down: a short cut forces a reconnect, one longer
// than the session timeout makes the server expire the session.
type Cutter struct {
	mu    sync.Mutex // guards down, conns
	down  bool
	conns []net.Conn
}

// Dial dials addr unless the connections are cut.
func (c *Cutter) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errors.New("connection cut by test")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// Cut closes every connection and refuses new ones until Heal.
func (c *Cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// Heal lets Dial connect again.
func (c *Cutter) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}
