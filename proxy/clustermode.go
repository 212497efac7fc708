package proxy

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/router"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// Cluster mode: to a cluster-mode client sluice is a Redis Cluster of one
// node that owns all 16384 slots at the announced address, so the client
// sends every command to sluice and sluice does the routing. The replies
// below copy Redis 7.0's RESP2 formats, byte for byte where a lone node's
// values allow, because client libraries parse them positionally.

// clusterEpoch is the node's config epoch and the cluster's current epoch.
// A formed cluster has bumped it past 0 (a lone node that never did
// reports 0 and cluster_state:fail).
const clusterEpoch = "1"

// clusterInfo is CLUSTER INFO as Redis 7.0 writes it for a healthy cluster
// of one node: no bus, so no messages, and the per-type message lines that
// Redis writes only for types it has counted are absent, as on a lone node.
const clusterInfo = "cluster_state:ok\r\n" +
	"cluster_slots_assigned:16384\r\n" +
	"cluster_slots_ok:16384\r\n" +
	"cluster_slots_pfail:0\r\n" +
	"cluster_slots_fail:0\r\n" +
	"cluster_known_nodes:1\r\n" +
	"cluster_size:1\r\n" +
	"cluster_current_epoch:" + clusterEpoch + "\r\n" +
	"cluster_my_epoch:" + clusterEpoch + "\r\n" +
	"cluster_stats_messages_sent:0\r\n" +
	"cluster_stats_messages_received:0\r\n" +
	"total_cluster_links_buffer_limit_exceeded:0\r\n"

// clusterMaxArgs is the most arguments Redis 7.0 takes (counted as
// arities are, the command's name included) for the variadic
// subcommands it bounds as it runs them; lookup checks their arities.
var clusterMaxArgs = map[string]int{"MEET": 5, "FAILOVER": 3, "RESET": 3}

// clusterAdmin are the subcommands that change a cluster. sluice refuses
// them rather than report an unknown subcommand: they are real, and the
// operator who typed one at sluice meant a node of the cluster.
var clusterAdmin = map[string]bool{
	"ADDSLOTS": true, "ADDSLOTSRANGE": true, "BUMPEPOCH": true, "DELSLOTS": true,
	"DELSLOTSRANGE": true, "FAILOVER": true, "FLUSHSLOTS": true, "FORGET": true,
	"MEET": true, "REPLICATE": true, "RESET": true, "SAVECONFIG": true,
	"SET-CONFIG-EPOCH": true, "SETSLOT": true,
}

// clusterKeys read the keys of a slot: before a cluster they go to the
// slot's primary (forwardSlotKeys), which holds all of them; the
// embedded backend has no slots to read.
var clusterKeys = map[string]bool{"COUNTKEYSINSLOT": true, "GETKEYSINSLOT": true}

// forwardSlotKeys takes CLUSTER COUNTKEYSINSLOT or GETKEYSINSLOT whose
// arguments Redis would take to the primary that owns the slot, as the
// one node of sluice's view owns every slot; false for any other CLUSTER
// call, which sluice answers.
func (s *Server) forwardSlotKeys(c *client, r *round, args [][]byte) bool {
	sub := strings.ToUpper(string(args[1]))
	if !clusterKeys[sub] || checkSlotArgs(args) != nil {
		return false
	}
	if !c.offPin() {
		c.retake, c.counted = true, true
		return true
	}
	slot, _ := parseRedisInt(args[2])
	r.fwd = append(r.fwd, router.Forward{Slot: int(slot), Cmd: r.command(args)})
	r.queueItem(c, fwdItem{first: len(r.fwd) - 1})
	c.offPinSent()
	s.cmdStats.of("cluster|" + strings.ToLower(sub)).forwarded.Add(1)
	return true
}

// clusterHelp is CLUSTER HELP for the subcommands sluice answers, in
// Redis's wording.
var clusterHelp = []string{
	"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"COUNT-FAILURE-REPORTS <node-id>",
	"    Return number of failure reports for <node-id>.",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"INFO",
	"    Return information about the cluster.",
	"KEYSLOT <key>",
	"    Return the hash slot for <key>.",
	"LINKS",
	"    Return information about all network links between this node and its peers.",
	"MYID",
	"    Return the node id.",
	"NODES",
	"    Return cluster configuration seen by node. Output format:",
	"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
	"REPLICAS <node-id>",
	"    Return <node-id> replicas.",
	"SHARDS",
	"    Return information about slot range mappings and the nodes associated with them.",
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
	"HELP",
	"    Prints this help.",
	"sluice answers as a cluster of one node that owns every slot; administer the cluster on its nodes.",
}

// cmdClusterMode answers CLUSTER as that one-node cluster.
func cmdClusterMode(s *Server, c *client, conn respConn, args [][]byte) {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case (sub == "ADDSLOTSRANGE" || sub == "DELSLOTSRANGE") && len(args)%2 == 1:
		// Redis 7.0 checks these pairs as it runs the subcommand, before
		// it changes anything, with its arity's error.
		s.writeError(conn, fmt.Errorf("wrong number of arguments for 'cluster|%s' command", strings.ToLower(sub)))
		return
	case clusterMaxArgs[sub] > 0 && len(args) > clusterMaxArgs[sub]:
		// Redis 7.0's error for more arguments than these take.
		name := args[1]
		if len(name) > 128 {
			name = name[:128]
		}
		s.writeError(conn, fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CLUSTER HELP.", name))
		return
	case clusterAdmin[sub]:
		s.writeError(conn, fmt.Errorf("sluice: CLUSTER %s is cluster administration; run it on the cluster's nodes", sub))
		return
	case clusterKeys[sub]:
		if err := checkSlotArgs(args); err != nil {
			s.writeError(conn, err)
			return
		}
		s.writeError(conn, fmt.Errorf("sluice: CLUSTER %s reads a slot of a cluster's node, and the embedded backend has none", sub))
		return
	}
	switch sub {
	case "HELP":
		conn.WriteArray(len(clusterHelp))
		for _, line := range clusterHelp {
			conn.WriteString(line)
		}
		return
	case "INFO":
		conn.WriteVerbatim(clusterInfo)
		return
	case "KEYSLOT":
		conn.WriteInt(hashslot.Of(string(args[2])))
		return
	case "LINKS":
		conn.WriteArray(0) // no bus, no peers
		return
	}

	n, err := s.clusterNode(c)
	if err != nil {
		s.writeError(conn, err)
		return
	}
	switch sub {
	case "MYID":
		conn.WriteBulkString(n.id)
	case "SLOTS":
		conn.WriteArray(1)
		conn.WriteArray(3)
		conn.WriteInt(0)
		conn.WriteInt(hashslot.Count - 1)
		conn.WriteArray(4)
		conn.WriteBulkString(n.host)
		conn.WriteInt(n.port)
		conn.WriteBulkString(n.id)
		// Other endpoints, as a map: the host given is the only one.
		conn.WriteMap(0)
	case "SHARDS":
		conn.WriteArray(1)
		conn.WriteMap(2)
		conn.WriteBulkString("slots")
		conn.WriteArray(2)
		conn.WriteInt(0)
		conn.WriteInt(hashslot.Count - 1)
		conn.WriteBulkString("nodes")
		conn.WriteArray(1)
		fields := 7
		if n.hostname {
			fields++
		}
		conn.WriteMap(fields)
		conn.WriteBulkString("id")
		conn.WriteBulkString(n.id)
		conn.WriteBulkString("port")
		conn.WriteInt(n.port)
		conn.WriteBulkString("ip")
		conn.WriteBulkString(n.host)
		conn.WriteBulkString("endpoint")
		conn.WriteBulkString(n.host)
		if n.hostname {
			conn.WriteBulkString("hostname")
			conn.WriteBulkString(n.host)
		}
		conn.WriteBulkString("role")
		conn.WriteBulkString("master")
		conn.WriteBulkString("replication-offset")
		conn.WriteInt(0)
		conn.WriteBulkString("health")
		conn.WriteBulkString("online")
	case "NODES":
		conn.WriteVerbatim(n.line())
	case "REPLICAS", "SLAVES":
		// Redis quotes an unknown name whole, as here.
		if string(args[2]) != n.id {
			s.writeError(conn, fmt.Errorf("Unknown node %s", args[2]))
			return
		}
		conn.WriteArray(0)
	case "COUNT-FAILURE-REPORTS":
		if string(args[2]) != n.id {
			s.writeError(conn, fmt.Errorf("Unknown node %s", args[2]))
			return
		}
		conn.WriteInt(0)
	}
}

// checkSlotArgs is Redis 7.0's check of COUNTKEYSINSLOT's slot and
// GETKEYSINSLOT's slot and count, in its order (both parsed, then the
// ranges), so that a call with bad arguments gets the error Redis gives it.
func checkSlotArgs(args [][]byte) error {
	var n [2]int64
	for i, a := range args[2:] {
		v, ok := parseRedisInt(a)
		if !ok {
			return errNotInt
		}
		n[i] = v
	}
	slot, count := n[0], n[1]
	switch {
	case len(args) == 3 && (slot < 0 || slot >= hashslot.Count):
		return errors.New("Invalid slot")
	case slot < 0 || slot >= hashslot.Count || count < 0:
		return errors.New("Invalid slot or number of keys")
	}
	return nil
}

// clusterNode is the one node sluice presents to cluster-mode clients.
type clusterNode struct {
	id   string
	host string
	port int
	// hostname: host is a name, not an address, as Redis reports a node's
	// cluster-announce-hostname.
	hostname bool
}

// line is the node's CLUSTER NODES line. Its bus port is 0: sluice has no
// cluster bus, and port+10000 would name some other process's port (or no
// port at all above 55535). Clients do not use the bus port.
func (n clusterNode) line() string {
	addr := n.host + ":" + strconv.Itoa(n.port) + "@0"
	if n.hostname {
		addr += "," + n.host
	}
	return n.id + " " + addr + " myself,master - 0 0 " + clusterEpoch + " connected 0-" + strconv.Itoa(hashslot.Count-1) + "\n"
}

// clusterNode is where c should send every slot's commands:
// Config.Announce, else the address c reached. Each listener is its own
// way in: with --listen and --tls-listen both served, a TLS client must be
// sent back to the TLS port and a plain one to the plain port, as a Redis
// node with port and tls-port answers each client with its own kind's.
// The address c reached also works when the listener is on every address
// (0.0.0.0, [::]), from afar too. A client without a TCP address of its own
// (a Unix socket) gets the first listener's, an unspecified IP given as
// 127.0.0.1 (Go's [::] listens on IPv4 too). The node's ID is the same
// whichever way a client came in: it is made from the first listener's.
func (s *Server) clusterNode(c *client) (clusterNode, error) {
	var n clusterNode
	if s.cfg.Announce != "" {
		host, p, err := parseAnnounce(s.cfg.Announce)
		if err != nil {
			return n, fmt.Errorf("sluice: %w", err)
		}
		n.host, n.port = host, p
		n.hostname = net.ParseIP(n.host) == nil
		// Every instance announcing this address (behind one load
		// balancer) is this node to a client, which may key its nodes by
		// ID: they give it one, and keep it across restarts, as Redis.
		n.id = nodeID(n.host, n.port, 0)
		return n, nil
	}
	a, ok := s.Addr().(*net.TCPAddr)
	if !ok {
		return n, errors.New("sluice: cluster clients need a TCP address and sluice is not serving one; announce one")
	}
	n.host, n.port = a.IP.String(), a.Port
	if a.IP.IsUnspecified() {
		n.host = "127.0.0.1"
	}
	n.id = nodeID(n.host, n.port, s.start.UnixNano())
	if l, ok := c.local.(*net.TCPAddr); ok {
		n.host, n.port = l.IP.String(), l.Port
	}
	return n, nil
}

// CheckAnnounce reports whether a is an address Config.Announce may
// give: a host and a port in 1-65535. One it refuses would have every
// CLUSTER SLOTS, SHARDS, NODES and MYID answer an error, so that a
// cluster-mode client could never start: refuse it when sluice starts.
func CheckAnnounce(a string) error {
	_, _, err := parseAnnounce(a)
	return err
}

func parseAnnounce(a string) (string, int, error) {
	host, port, err := net.SplitHostPort(a)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p <= 0 || p > 65535 || host == "" {
		return "", 0, fmt.Errorf("the announced address %q is not host:port", a)
	}
	// The host goes unquoted into CLUSTER NODES, between separators a
	// client splits on (' ', ',', '@'): a name must be of the characters
	// Redis allows in cluster-announce-hostname.
	if net.ParseIP(host) == nil && strings.TrimLeft(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" {
		return "", 0, fmt.Errorf("the announced host %q is neither an IP address nor a name of letters, digits, '-' and '.'", host)
	}
	return host, p, nil
}

// nodeID is a Redis node ID (40 lowercase hex digits) made from the
// node's address and, for an address that is the instance's own, its
// start time (0 for an announced one): Server has no field to keep a
// random one in, so it is made from what the Server does keep. The start
// time tells apart instances that serve the same address on different
// hosts (containers), and the address instances started at the same
// instant.
func nodeID(host string, port int, startNanos int64) string {
	sum := sha1.Sum([]byte(net.JoinHostPort(host, strconv.Itoa(port)) + " " + strconv.FormatInt(startNanos, 10)))
	return hex.EncodeToString(sum[:])
}

// cmdReadonly answers READONLY, which cluster clients send to read from
// replicas: with --read-from-replicas, it undoes a READWRITE; without,
// sluice reads from primaries either way.
func cmdReadonly(_ *Server, c *client, conn respConn, _ [][]byte) {
	c.readWrite, c.readOnly = false, true
	c.published()
	conn.WriteString("OK")
}

// cmdReadwrite answers READWRITE, with which a cluster client reads its
// own writes again: its reads go to the primaries, as they do for a
// Redis Cluster connection.
func cmdReadwrite(_ *Server, c *client, conn respConn, _ [][]byte) {
	c.readWrite, c.readOnly = true, false
	c.published()
	conn.WriteString("OK")
}

// cmdAsking answers ASKING, which a client sends before following an ASK
// redirect. sluice never redirects, but a client may still send it.
func cmdAsking(_ *Server, _ *client, conn respConn, _ [][]byte) {
	conn.WriteString("OK")
}
