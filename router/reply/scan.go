package reply

import "bytes"

// Scanner finds where a reply ends in bytes that arrive a read at a time.
// Read, given a reply's bytes from their start at each read until it is
// whole, would go over them all again each time: a big array, which comes
// in many reads, would cost the square of its size. A Scanner goes on
// from where it stopped. It checks each line as Read does, and a reply
// Read would refuse is said to be whole at the first bad line, for Read to
// refuse: bytes a broken node sends are not held for a reply that is not
// one.
type Scanner struct {
	at   int     // where the next element starts, from the reply's start
	open []int64 // elements each aggregate around it is still owed, innermost last
	// short: how many bytes past b the string that b ends in still needs
	// (Short).
	short int
	// refused: the reply Whole last ended is one Read refuses (Refused).
	refused bool
}

// Refused says whether the reply Whole last said whole is one Read
// refuses: Read then says why. One it does not refuse is the bytes Read
// would take, to be taken as they are.
func (s *Scanner) Refused() bool { return s.refused }

// Short is how many more bytes, at least, the reply needs, as far as the
// length of a string it is in the middle of says; 0 when Whole did not
// end in one. A reader may size its buffer by it once rather than growing
// it toward a big string a read at a time.
func (s *Scanner) Short() int { return s.short }

// Whole returns the length of the reply that b starts with once b holds
// all of it, and 0 while it does not. Until Whole returns more than 0, b
// must start with the same bytes at each call (the reply's, and those
// that came since); then the Scanner starts over, for the next reply.
func (s *Scanner) Whole(b []byte) int {
	s.short, s.refused = 0, false
	for s.at < len(b) {
		nl := bytes.IndexByte(b[s.at:], '\n')
		if nl < 0 {
			return 0
		}
		end := s.at + nl + 1
		if end-s.at < 3 || b[end-2] != '\r' {
			return s.refuse(len(b))
		}
		body, elems, err := parseLine(b[s.at], b[s.at+1:end-2])
		if err != nil {
			return s.refuse(len(b))
		}
		next := end
		if body >= 0 {
			if int64(len(b)-end) < body+2 {
				s.short = int(body + 2 - int64(len(b)-end))
				return 0
			}
			next = end + int(body) + 2
			// As Read checks a body's end, and a verbatim string's format.
			if b[next-2] != '\r' || b[next-1] != '\n' || (b[s.at] == '=' && (body < 4 || b[end+3] != ':')) {
				return s.refuse(len(b))
			}
		}
		s.at = next
		if elems > 0 {
			if len(s.open) == maxDepth {
				return s.refuse(len(b))
			}
			s.open = append(s.open, elems)
			continue
		}
		// One element is whole, which may complete the aggregates around it.
		for {
			last := len(s.open) - 1
			if last < 0 {
				return s.judge(s.at)
			}
			if s.open[last]--; s.open[last] > 0 {
				break
			}
			s.open = s.open[:last]
		}
	}
	return 0
}

// judge starts over, and returns n: where the reply ends.
func (s *Scanner) judge(n int) int {
	s.at, s.open = 0, s.open[:0]
	return n
}

// refuse is judge for a reply Read refuses: all of b, for Read to say why.
func (s *Scanner) refuse(n int) int {
	s.refused = true
	return s.judge(n)
}
