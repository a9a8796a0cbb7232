package zkgroup

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Digest is a ZooKeeper digest identity, "user:password".
type Digest struct {
	User, Password string
}

// ParseDigest parses "user:password" (the password may contain ':').
func ParseDigest(s string) (Digest, error) {
	user, pw, ok := strings.Cut(strings.TrimRight(s, "\r\n"), ":")
	if !ok || user == "" || pw == "" {
		return Digest{}, errors.New("zkgroup: digest must be user:password")
	}
	return Digest{user, pw}, nil
}

// DigestFromEnv reads a digest identity from the variable name (for example
// HOTSPOT_ZK_DIGEST=user:password) or, when that is empty, from the file
// that name+"_FILE" points to. Neither set: the zero Digest, no auth.
func DigestFromEnv(getenv func(string) string, name string) (Digest, error) {
	v := getenv(name)
	if f := getenv(name + "_FILE"); f != "" {
		if v != "" {
			return Digest{}, fmt.Errorf("%s and %s_FILE: give one of them", name, name)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return Digest{}, fmt.Errorf("%s_FILE: %w", name, err)
		}
		v = string(b)
	}
	if v == "" {
		return Digest{}, nil
	}
	d, err := ParseDigest(v)
	if err != nil {
		return Digest{}, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// IsZero reports whether d is no identity.
func (d Digest) IsZero() bool { return d.User == "" }

// ACL is what every node a Session creates carries.
//
// With a Writer identity, the node is writable by that identity only
// (ZooKeeper digest ACL, every permission) and readable by each Reader
// identity, or by anyone when Readers is empty. Without one, nodes are open
// to everyone (the default of a local, unsecured stack).
type ACL struct {
	Writer  Digest   // hotspotd's identity; zero means open nodes
	Readers []Digest // app identities that may read; empty means anyone may read
}

// list returns the ZooKeeper ACL list.
func (a ACL) list() []zk.ACL {
	if a.Writer.IsZero() {
		return zk.WorldACL(zk.PermAll)
	}
	acl := zk.DigestACL(zk.PermAll, a.Writer.User, a.Writer.Password)
	if len(a.Readers) == 0 {
		return append(acl, zk.WorldACL(zk.PermRead)...)
	}
	for _, r := range a.Readers {
		if r == a.Writer {
			continue
		}
		acl = append(acl, zk.DigestACL(zk.PermRead, r.User, r.Password)...)
	}
	return acl
}

// private returns the ACL of a node only the writer identity may read and
// write (secrets such as webhook keys); without a Writer it is list's open
// ACL.
func (a ACL) private() []zk.ACL {
	if a.Writer.IsZero() {
		return zk.WorldACL(zk.PermAll)
	}
	return zk.DigestACL(zk.PermAll, a.Writer.User, a.Writer.Password)
}
