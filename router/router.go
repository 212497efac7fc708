// Package router decides bucket requests: it owns where a bucket lives
// (the cluster shard of its slot, or this process) and, as sluice grows,
// shard health, hot-key splitting and the local fallback.
package router

import (
	"github.com/sluice-rl/sluice/router/bucket"
)

// Op is what a Request does to its bucket.
type Op uint8

const (
	// Take takes Cost tokens (0 peeks).
	Take Op = iota
	// Reset deletes the bucket, making it full.
	Reset
)

// Request is one operation on the bucket named Key.
type Request struct {
	Op       Op
	Key      string
	Interval bucket.Interval // Take only
	Cost     int64           // Take only
	stored   string          // Key under KeyPrefix, when made with KeyRequest
}

// KeyRequest is an op on the bucket named key, copied from key once, with
// KeyPrefix before it: deciding it on the cluster then takes no copy of
// its own.
func KeyRequest(op Op, key []byte) Request {
	stored := KeyPrefix + string(key)
	return Request{Op: op, Key: stored[len(KeyPrefix):], stored: stored}
}

// storedKey is r's key as the cluster stores it.
func (r *Request) storedKey() string {
	if r.stored != "" {
		return r.stored
	}
	return KeyPrefix + r.Key
}

// Result is the outcome of a Request. Err is set when it could not be
// decided; the other fields are then zero.
type Result struct {
	bucket.Result
	Existed bool // Reset: there was a bucket to delete
	Source  Source
	Err     error
}

// Source is what decided a Result.
type Source uint8

const (
	SourceCluster  Source = iota // the Lua step on the key's shard
	SourceEmbedded               // the in-memory backend (no cluster configured)
	SourceLocal                  // fallback: an in-process bucket with a share of the limit
	SourceOpen                   // fallback: allowed without a bucket
	SourceClosed                 // fallback: denied without a bucket
	numSources
)

// NumSources is how many Sources there are: arrays indexed by Source.
const NumSources = int(numSources)

var sourceNames = [numSources]string{"cluster", "embedded", "local", "open", "closed"}

func (s Source) String() string { return sourceNames[s] }
