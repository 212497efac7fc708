package router

// fifo holds the commands written to a node, in the order their replies
// come. Taking from the front of a slice while appending at its back would
// allocate a new array every few commands when few are in flight (the
// array's front is lost to each take): fifo moves what is left to the
// front of its array instead, once at least half of it was taken, so its
// array is reused and each command is moved at most once per take.
type fifo struct {
	buf  []*forwarded
	head int
}

func (q *fifo) len() int { return len(q.buf) - q.head }

// all is what q holds, first in first.
func (q *fifo) all() []*forwarded { return q.buf[q.head:] }

func (q *fifo) push(fs ...*forwarded) {
	if len(q.buf)+len(fs) > cap(q.buf) && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, fs...)
}

// pop takes the first command off; q must not be empty.
func (q *fifo) pop() *forwarded {
	f := q.buf[q.head]
	q.buf[q.head] = nil // the command goes back to its pool once answered
	if q.head++; q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return f
}

// takeAll empties q, and returns what it held.
func (q *fifo) takeAll() []*forwarded {
	all := q.all()
	*q = fifo{}
	return all
}
