package zkgroup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// EnsurePath creates path and its missing parents as persistent nodes with
// no data and an open ACL. Nodes that already exist (made by anyone, at any
// moment) are fine. It makes one call when path exists already. A Session's
// own node operations (Join, Create, Put) make parents with its ACL instead.
func EnsurePath(conn *zk.Conn, path string) error {
	return ensurePath(conn, path, zk.WorldACL(zk.PermAll))
}

// ensurePath is EnsurePath with the ACL the created nodes carry.
func ensurePath(conn *zk.Conn, path string, acl []zk.ACL) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if path == "/" {
		return nil
	}
	if ok, _, err := conn.Exists(path); err != nil {
		return fmt.Errorf("zkgroup: ensure %s: %w", path, err)
	} else if ok {
		return nil
	}
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		_, err := conn.Create(path[:i], nil, 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zkgroup: ensure %s: create %s: %w", path, path[:i], err)
		}
	}
	return nil
}

// checkPath rejects what ZooKeeper would reject later, with a clearer error.
func checkPath(path string) error {
	if path == "/" {
		return nil
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		return fmt.Errorf("zkgroup: invalid path %q: want /a/b: %w", path, zk.ErrInvalidPath)
	}
	return nil
}

// child returns dir/name.
func child(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// checkName rejects member names that are not one path segment.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("zkgroup: invalid member name %q: %w", name, zk.ErrInvalidPath)
	}
	return nil
}
