package proxy

import (
	"bytes"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/glob"
)

// With a cluster behind it, COMMAND answers from the cluster's own table,
// with sluice's commands the cluster has not (THROTTLE, GCRA, ...) added:
// cluster clients (redis-py's RedisCluster, go-redis's ClusterClient) look
// up every command they send in it.

// ownCommands are sluice's commands the cluster's table lacks, by name.
func ownCommands(specs map[string]*cmdspec.Spec) []*command {
	var own []*command
	for name, cmd := range commands {
		if _, ok := specs[name]; !ok {
			own = append(own, cmd)
		}
	}
	sort.Slice(own, func(i, j int) bool { return own[i].name < own[j].name })
	return own
}

// forwardCommand queues COMMAND for the cluster, with what sluice adds to
// its reply. It reports false when sluice answers it alone: without the
// cluster's table, or for subcommands it passes through as they are.
func (s *Server) forwardCommand(c *client, r *round, args [][]byte) bool {
	specs := s.cfg.Forwarder.Commands()
	if specs == nil {
		return false
	}
	own := ownCommands(specs)
	sub := ""
	if len(args) > 1 {
		sub = lowerName(args[1])
	}
	var post func([]byte) []byte
	// The protocol the command is sent in: a HELLO pipelined behind it
	// changes c's before its reply is in.
	resp3 := c.resp3
	switch {
	case sub == "" || (sub == "info" && len(args) == 2):
		post = func(p []byte) []byte { return appendOwn(p, own, resp3) }
	case sub == "count":
		post = func(p []byte) []byte {
			n, err := strconv.Atoi(string(bytes.TrimSpace(p[1:])))
			if p[0] != ':' || err != nil {
				return unexpected(p)
			}
			return append(strconv.AppendInt([]byte{':'}, int64(n+len(own)), 10), '\r', '\n')
		}
	case sub == "list" && (len(args) == 2 || (len(args) == 5 && bytes.EqualFold(args[2], []byte("filterby")))):
		var mine []*command
		for _, cmd := range own {
			if len(args) == 2 || listedBy(cmd, args[3], args[4]) {
				mine = append(mine, cmd)
			}
		}
		post = func(p []byte) []byte {
			var w replyBuf
			for _, cmd := range mine {
				w.WriteBulkString(cmd.name)
			}
			return appendElements(p, len(mine), w.b)
		}
	case sub == "info":
		// The cluster answers for its names, sluice for its own, in the
		// order asked.
		mine := map[int]*command{}
		asked := [][]byte{args[0], args[1]}
		for i, a := range args[2:] {
			if cmd := ownByName(own, a); cmd != nil {
				mine[i] = cmd
			} else {
				asked = append(asked, a)
			}
		}
		if len(asked) == 2 {
			// Only sluice's names: the cluster, asked of none, would
			// answer every command of its own.
			return false
		}
		if len(mine) > 0 {
			args = asked
			post = func(p []byte) []byte { return spliceInfo(p, mine, resp3) }
		}
	case sub == "getkeys" || sub == "getkeysandflags":
		// sluice finds the keys of its own commands; the cluster those of
		// its.
		if len(args) > 2 && ownByName(own, args[2]) != nil {
			return false
		}
	case sub == "docs":
		// The cluster documents its commands, sluice its own (those with
		// docs), added to the cluster's map.
		var mine []*command
		asked := [][]byte{args[0], args[1]}
		for _, cmd := range own {
			if cmd.summary != "" && (len(args) == 2 || slices.ContainsFunc(args[2:], func(a []byte) bool { return strings.EqualFold(string(a), cmd.name) })) {
				mine = append(mine, cmd)
			}
		}
		for _, a := range args[2:] {
			if ownByName(own, a) == nil {
				asked = append(asked, a)
			}
		}
		if len(args) > 2 && len(asked) == 2 {
			return false // only sluice's names: it answers alone
		}
		if len(mine) > 0 {
			args = asked
			post = func(p []byte) []byte { return appendDocs(p, mine, resp3) }
		}
	}
	s.forwardOne(c, r, router.Forward{Slot: router.AnySlot, Cmd: r.command(args)})
	r.items[len(r.items)-1].post = post
	return true
}

// listedBy reports whether COMMAND LIST FILTERBY lists cmd, one of
// sluice's, as Redis lists its own: a PATTERN matched regardless of case,
// an ACLCAT of its categories. No module has it.
func listedBy(cmd *command, filter, arg []byte) bool {
	switch lowerName(filter) {
	case "pattern":
		return glob.Match(cmd.name, string(bytes.ToLower(arg)))
	case "aclcat":
		return slices.Contains(cmd.acl, string(bytes.ToLower(arg)))
	}
	return false
}

func ownByName(own []*command, name []byte) *command {
	for _, cmd := range own {
		if string(bytes.ToLower(name)) == cmd.name {
			return cmd
		}
	}
	return nil
}

// appendOwn adds sluice's entries to the cluster's COMMAND reply.
func appendOwn(p []byte, own []*command, resp3 bool) []byte {
	w := replyBuf{resp3: resp3}
	for _, cmd := range own {
		writeCommandInfo(&w, cmd)
	}
	return appendElements(p, len(own), w.b)
}

// appendElements adds n elements, encoded in more, to the array p.
func appendElements(p []byte, n int, more []byte) []byte {
	elems, ok := elements(p)
	if !ok {
		return unexpected(p)
	}
	out := appendArrayHeader(nil, len(elems)+n)
	for _, e := range elems {
		out = append(out, e...)
	}
	return append(out, more...)
}

// appendDocs adds sluice's entries to the cluster's COMMAND DOCS reply: a
// map in RESP3, a flat array of names and docs in RESP2.
func appendDocs(p []byte, mine []*command, resp3 bool) []byte {
	head, body, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok || len(head) < 2 || (head[0] != '*' && head[0] != '%') {
		return unexpected(p)
	}
	n, err := strconv.Atoi(string(head[1:]))
	if err != nil || n < 0 {
		return unexpected(p)
	}
	w := replyBuf{resp3: resp3}
	for _, cmd := range mine {
		writeDocs(&w, cmd)
	}
	if head[0] == '*' {
		n += 2 * len(mine)
	} else {
		n += len(mine)
	}
	out := append(strconv.AppendInt([]byte{head[0]}, int64(n), 10), '\r', '\n')
	return append(append(out, body...), w.b...)
}

// spliceInfo puts sluice's entries for COMMAND INFO where they were asked.
func spliceInfo(p []byte, mine map[int]*command, resp3 bool) []byte {
	elems, ok := elements(p)
	if !ok {
		return unexpected(p)
	}
	n := len(elems) + len(mine)
	out := appendArrayHeader(nil, n)
	for i := range n {
		if cmd := mine[i]; cmd != nil {
			w := replyBuf{resp3: resp3}
			writeCommandInfo(&w, cmd)
			out = append(out, w.b...)
			continue
		}
		out = append(out, elems[0]...)
		elems = elems[1:]
	}
	return out
}
