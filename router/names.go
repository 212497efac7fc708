package router

import "strings"

// sluice's own names in Redis, all in one place. Every one starts with
// "sluice" and a character no other of them uses there: a caller's bucket
// "sluice:<key>", a hot key's sub-bucket "sluice{tag}<gen>:<key>" (named by
// lua.Split.SubKey) and its stand-in "sluice{tag}<gen>.<i>:<key>"
// (lua.Split.StandInKey), and the names below, outside KeyPrefix, so that no
// caller's key can take them (THROTTLE instances would otherwise meet the
// heartbeat's sorted set).

// KeyPrefix goes before every caller key in Redis, so buckets have a
// namespace of their own. It has no '{', so a {tag} in the caller's key
// still decides the slot.
const KeyPrefix = "sluice:"

const (
	instancesKey = "sluice.instances"
	probePrefix  = "sluice.probe:"
	scriptsKey   = "sluice.scripts"
)

// IsInternal reports whether key, as stored in Redis, is one of sluice's
// own: a bucket, a sub-bucket, the heartbeat, a probe or the scripts. Commands passed
// through to the cluster must keep callers away from them.
func IsInternal(key string) bool {
	rest, ok := strings.CutPrefix(key, "sluice")
	return ok && rest != "" && strings.IndexByte(":{.", rest[0]) >= 0
}
