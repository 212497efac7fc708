// Package slot is Redis Cluster's key-to-slot mapping: CRC16 (XMODEM) of
// the key, or of its {hash tag}, modulo 16384.
package slot

// Count is the number of hash slots.
const Count = 16384

var table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ table[byte(c>>8)^s[i]]
	}
	return c
}

// Of is the slot of key. As in Redis, when key has a '{' followed later by
// a '}' with at least one byte between them, only those bytes are hashed.
func Of(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(crc16(key) % Count)
			}
		}
		break
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
