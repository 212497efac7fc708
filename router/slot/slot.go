// Package slot is Redis Cluster's key-to-slot mapping: CRC16 (XMODEM) of
// the key, or of its {hash tag}, modulo 16384.
package slot

import "strings"

// Count is the number of hash slots.
const Count = 16384

// tables[k][x] is the CRC of the byte x followed by k zero bytes. CRC is
// linear, so eight bytes are eight independent lookups (slicing-by-8)
// where the byte-wise table makes a chain of eight dependent ones: the
// slot of every key a command names is computed on a loop's hot path.
var tables = func() (t [8][256]uint16) {
	for i := range t[0] {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[0][i] = c
	}
	for k := 1; k < len(t); k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = c<<8 ^ t[0][c>>8]
		}
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for ; len(s) >= 8; s = s[8:] {
		c = tables[7][byte(c>>8)^s[0]] ^ tables[6][byte(c)^s[1]] ^ tables[5][s[2]] ^ tables[4][s[3]] ^
			tables[3][s[4]] ^ tables[2][s[5]] ^ tables[1][s[6]] ^ tables[0][s[7]]
	}
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ tables[0][byte(c>>8)^s[i]]
	}
	return c
}

// Of is the slot of key. As in Redis, when key has a '{' followed later by
// a '}' with at least one byte between them, only those bytes are hashed.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Count)
}

// Tags holds, for every slot, a short string whose slot that is: "{tag}"
// in a key then places the key on any chosen slot.
type Tags [Count]string

// NewTags finds a tag for every slot, shortest first.
func NewTags() *Tags {
	var t Tags
	left := Count
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	buf := make([]byte, 0, 4)
	var walk func(depth int)
	walk = func(depth int) {
		if depth == 0 {
			s := string(buf)
			if sl := crc16(s) % Count; t[sl] == "" {
				t[sl] = s
				left--
			}
			return
		}
		for i := 0; i < len(alphabet) && left > 0; i++ {
			buf = append(buf, alphabet[i])
			walk(depth - 1)
			buf = buf[:len(buf)-1]
		}
	}
	for n := 1; left > 0; n++ {
		walk(n)
	}
	return &t
}
