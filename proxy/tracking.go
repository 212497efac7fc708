package proxy

import (
	"errors"
	"strconv"

	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// Client-side caching (CLIENT TRACKING ON) without a tracking table:
// sluice invalidates the keys a tracking client reads right after the
// reply that carries them, on the same connection. Redis may send an
// invalidation at any time for a key it tracks (it does so whenever its
// tracking table is full, tracking-table-max-keys), and a client drops
// what it cached of the key: so no client keeps a value past its reply,
// and none can read a stale one, whoever writes the key and wherever (on
// another sluice, or on the cluster directly). A caching client (rueidis,
// whose default turns tracking on, and node-redis's clientSideCache)
// works unchanged, without the savings of its cache. Tracking what every
// client read, as Redis does, would need the nodes to track the keys read
// through sluice's shared connections and a table of sluice's own to fan
// their invalidations out, ordered after each client's replies in
// flight: not built.
//
// The push goes after the reply, never before: a client that got the
// invalidation first would cache the value after it. Inside MULTI the
// keys' pushes go after EXEC's reply, which carries the values.

// tracking is a client's CLIENT TRACKING ON state; nil while off.
type tracking struct {
	optin, optout, noloop bool
	// caching: CLIENT CACHING YES (OPTIN) or NO (OPTOUT) was the last
	// command; shown by TRACKINGINFO, as Redis keeps it only that long.
	caching bool
}

// trackingOpts are CLIENT TRACKING's options.
type trackingOpts struct {
	redirect                     int64
	prefixes                     int
	bcast, optin, optout, noloop bool
}

// trackOn turns c's tracking on with o, refusing what Redis 7.0 refuses
// in its order, then what sluice does not do: BCAST (invalidations of
// keys the client never read, written anywhere) and REDIRECT (to another
// connection, whose pushes could overtake this one's replies).
func (c *client) trackOn(o trackingOpts) error {
	old := c.track
	switch {
	case !o.bcast && o.prefixes > 0:
		return errors.New("ERR PREFIX option requires BCAST mode to be enabled")
	case old != nil && o.bcast:
		return errors.New("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
	case o.bcast && (o.optin || o.optout):
		return errors.New("ERR OPTIN and OPTOUT are not compatible with BCAST")
	case o.optin && o.optout:
		return errors.New("ERR You can't specify both OPTIN mode and OPTOUT mode")
	case old != nil && (o.optin && old.optout || o.optout && old.optin):
		return errors.New("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
	case o.bcast:
		return errors.New("sluice does not support CLIENT TRACKING ON with BCAST: it invalidates the keys a client reads, not every key written")
	case o.redirect != 0:
		return errors.New("sluice does not support CLIENT TRACKING ON with REDIRECT: invalidations go on the client's own RESP3 connection")
	}
	// Redis's enableTracking resets the modes but not CACHING's flag,
	// which a client already tracking keeps, shown under its new mode.
	c.track = &tracking{optin: o.optin, optout: o.optout, noloop: o.noloop, caching: old != nil && old.caching}
	c.published()
	return nil
}

// caching answers CLIENT CACHING yes|no as Redis 7.0 does.
func (c *client) caching(opt string) error {
	t := c.track
	switch {
	case t == nil:
		return errors.New("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	case opt == "yes" && !t.optin:
		return errors.New("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	case opt == "no" && !t.optout:
		return errors.New("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	case opt != "yes" && opt != "no":
		return errors.New("syntax error")
	}
	t.caching = true
	return nil
}

// afterCommand forgets a CLIENT CACHING once the command after it is
// taken, as Redis forgets it after each command but CLIENT's and those
// queued in a transaction (MULTI's own too; EXEC and DISCARD end it).
// A bare CLIENT, or one of a subcommand Redis lacks, is no CLIENT command
// to Redis (it finds none), and ends it too.
func (t *tracking) afterCommand(cmd *command, c *client, args [][]byte) {
	if cmd == clientCommand && len(args) > 1 && cmd.fullName(args) != nil {
		return
	}
	name := lowerName(args[0])
	if (c.multi == nil && name != "multi") || name == "exec" || name == "discard" {
		t.caching = false
	}
}

// invalidates reports whether the reply to a command that reads keys
// must be followed by their invalidation: the client tracks, in RESP3
// (in RESP2 Redis sends a client without REDIRECT none either).
func (c *client) invalidates() bool {
	return c.track != nil && c.resp3
}

// tracks reports whether the keys of the command after t's last CLIENT
// CACHING are tracked, as Redis decides: in OPTIN mode only after
// CACHING yes, in OPTOUT mode unless after CACHING no. A client in OPTIN
// mode caches only what it asked so for (rueidis's default, which sends
// its plain commands without it), so the rest need no invalidation: sent
// anyway, each of its plain reads and scripts would carry a push it
// ignores.
func (t *tracking) tracks() bool {
	switch {
	case t.optin:
		return t.caching
	case t.optout:
		return !t.caching
	}
	return true
}

// invalidatesThis is invalidates for the command being taken, outside a
// transaction (MULTI keeps every read's keys: over-invalidation is within
// the protocol, and Redis's flag spans the transaction).
func (c *client) invalidatesThis() bool {
	return c.invalidates() && c.tracked
}

// readsKeys reports whether a command's keys are tracked for the client
// that sends it: a read's, and a script's or function's declared keys,
// since Redis tracks the keys a script reads for its caller (rueidislock
// waits for the invalidation of a lock key its script read: without one,
// a waiter on another client never wakes). sluice cannot see what a
// script reads, so it invalidates all its declared keys.
func readsKeys(spec *cmdspec.Spec) bool {
	return spec.Has("readonly") || runsCode[spec.Name]
}

// appendKeyBulks appends args[k] for each k of keys as bulk strings: the
// elements of an invalidation.
func appendKeyBulks(b []byte, args [][]byte, keys []int) []byte {
	for _, k := range keys {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(args[k])), 10)
		b = append(b, "\r\n"...)
		b = append(b, args[k]...)
		b = append(b, "\r\n"...)
	}
	return b
}

// invalidation is the RESP3 push of n keys, whose bulk strings are
// bulks (appendKeyBulks).
func invalidation(n int, bulks []byte) []byte {
	b := make([]byte, 0, 32+len(bulks))
	b = append(b, ">2\r\n$10\r\ninvalidate\r\n*"...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n"...)
	return append(b, bulks...)
}
