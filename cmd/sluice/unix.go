package main

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"time"
)

// unixOptions are the flags of the Unix socket sluice serves beside its
// TCP addresses, as Redis's unixsocket and unixsocketperm.
type unixOptions struct {
	path string
	perm string
	mode fs.FileMode // perm, parsed by check
}

// maxUnixPath is the longest socket path Linux binds (sun_path, less its
// NUL): a longer one fails with a bare "invalid argument" once the
// cluster has been waited for.
const maxUnixPath = 107

func (o *unixOptions) check() error {
	m, err := strconv.ParseUint(o.perm, 8, 32)
	if err != nil || m > 0o777 {
		return fmt.Errorf("--unixsocketperm must be a mode in octal from 0 to 777, not %q", o.perm)
	}
	o.mode = fs.FileMode(m)
	switch {
	case o.path == "" && o.mode != 0:
		return fmt.Errorf("--unixsocketperm needs --unixsocket")
	case len(o.path) > maxUnixPath:
		return fmt.Errorf("--unixsocket must be a path of at most %d bytes, not %d", maxUnixPath, len(o.path))
	}
	return nil
}

// listen listens on the socket at o.path, in the place of one left there
// by a process that ended without removing it (a crash), as Redis does.
// Redis removes whatever is there; a file that is no socket, or a socket
// a live process serves, is refused here instead: two instances given one
// path, or a path that names a file, is a mistake in the deployment that
// would go unnoticed until the first one's clients failed.
func (o unixOptions) listen() (net.Listener, error) {
	if fi, err := os.Lstat(o.path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("--unixsocket %s: there is a file there that is not a socket", o.path)
		}
		if c, err := net.DialTimeout("unix", o.path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("--unixsocket %s: another process serves it", o.path)
		}
		if err := os.Remove(o.path); err != nil {
			return nil, fmt.Errorf("--unixsocket: %w", err)
		}
	}
	ln, err := net.Listen("unix", o.path)
	if err != nil {
		return nil, err
	}
	if o.mode != 0 {
		if err := os.Chmod(o.path, o.mode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("--unixsocketperm: %w", err)
		}
	}
	return ln, nil
}
