package proxy

import "time"

// SetHandshakeTimeout sets the TLS handshake bound for a test and puts it
// back after.
func SetHandshakeTimeout(cleanup func(func()), d time.Duration) {
	old := handshakeTimeout
	handshakeTimeout = d
	cleanup(func() { handshakeTimeout = old })
}
