package router

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
