package grammar

import (
	"math"
)

// frame kinds
const (
	fValue   = iota // a value of n starts here (whitespace allowed inside containers)
	fObject         // inside an object
	fArray          // inside an array
	fString         // inside a string value (after the opening quote)
	fKey            // inside an object key (after the opening quote)
	fNumber         // inside a number
	fLiteral        // inside true/false/null or an enum text: lit holds the candidates
)

// Candidate lists (literal texts, key names) are never filtered into new
// slices: a frame keeps its list, ref (one candidate that matches what
// was written) and count (the bytes written), and a candidate is alive
// while it starts with the same count bytes as lit[ref]. So a step
// allocates nothing.

// object phases
const (
	oKeyOrEnd   = iota // after '{' (or after ',' with first=false)
	oColon             // after the key
	oValue             // after ':'
	oCommaOrEnd        // after a value
)

// frame is one level of the parse; frames are small values, so a state is
// copied by copying its stack.
type frame struct {
	kind  int
	n     *node
	phase int
	next  int  // object: index of the next property that may come
	cur   int  // object: the property being written (−1: a free key)
	first bool // object/array: nothing written yet
	count int  // array items, string characters, number digits
	ws    int  // whitespace bytes in a row
	exp   int  // number: exponent digits
	u8    int  // string: UTF-8 continuation bytes still due
	u8lo  byte // string: range of the next continuation byte
	u8hi  byte
	lit   []string // literal candidates (fLiteral) or key candidates (fKey; nil: a free key)
	ref   int      // fLiteral, fKey: an alive candidate
}

// alive reports whether candidate c of a literal or key frame still
// matches the count bytes written.
func (f *frame) alive(c string) bool {
	return len(c) >= f.count && c[:f.count] == f.lit[f.ref][:f.count]
}

// step moves a literal or key frame on by b: false when no alive
// candidate continues with b.
func (f *frame) step(b byte) bool {
	for i, c := range f.lit {
		if len(c) > f.count && c[f.count] == b && f.alive(c) {
			f.ref = i
			f.count++
			return true
		}
	}
	return false
}

// ended is the index of an alive candidate that is complete (−1: none).
func (f *frame) ended() int {
	for i, c := range f.lit {
		if len(c) == f.count && f.alive(c) {
			return i
		}
	}
	return -1
}

// literals are the texts of true, false and null.
var literals = [...]string{"true", "false", "null"}

// maxWS bounds whitespace in a row; maxDigits the digits of a number.
const (
	maxWS     = 4
	maxDigits = 15
)

// state is a parse position: a stack of frames, top last.
type state struct {
	stack []frame
	done  bool // the root value is complete
}

func newState(root *node) state {
	return state{stack: []frame{{kind: fValue, n: root}}}
}

func (s state) clone(buf []frame) state {
	return state{stack: append(buf[:0], s.stack...), done: s.done}
}

func isWS(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// feed advances by one byte; false means the byte cannot come next.
func (s *state) feed(b byte) bool {
	for {
		if len(s.stack) == 0 {
			return false // nothing may follow the root value
		}
		top := &s.stack[len(s.stack)-1]
		switch top.kind {
		case fValue:
			return s.startValue(b)
		case fObject:
			return s.object(top, b)
		case fArray:
			again, ok := s.array(top, b)
			if !again {
				return ok
			}
		case fString:
			return s.str(top, b)
		case fKey:
			return s.key(top, b)
		case fNumber:
			again, ok := s.number(top, b)
			if !again {
				return ok
			}
		case fLiteral:
			again, ok := s.literal(top, b)
			if !again {
				return ok
			}
		}
	}
}

// pop removes the top frame, its value complete, and tells the parent.
func (s *state) pop() {
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) == 0 {
		s.done = true
		return
	}
	p := &s.stack[len(s.stack)-1]
	switch p.kind {
	case fObject:
		if p.phase == oKeyOrEnd { // the key was closed
			p.phase = oColon
		} else {
			p.phase, p.first = oCommaOrEnd, false
		}
	case fArray:
		p.phase, p.first = 1, false
		p.count++
	}
}

// startValue replaces the fValue frame on top with the value b starts.
func (s *state) startValue(b byte) bool {
	top := &s.stack[len(s.stack)-1]
	n := top.n
	if isWS(b) {
		if len(s.stack) == 1 || top.ws >= maxWS {
			return false
		}
		top.ws++
		return true
	}
	if n.enum != nil {
		*top = frame{kind: fLiteral, n: n, lit: n.enum}
		if !top.step(b) {
			return false
		}
		s.literalDone(top)
		return true
	}
	switch {
	case b == '{' && n.types&tObject != 0:
		*top = frame{kind: fObject, n: n, phase: oKeyOrEnd, first: true, cur: -1}
	case b == '[' && n.types&tArray != 0:
		*top = frame{kind: fArray, n: n, first: true}
	case b == '"' && n.types&tString != 0:
		*top = frame{kind: fString, n: n}
	case (b == '-' || (b >= '0' && b <= '9')) && n.types&(tNumber|tInteger) != 0:
		*top = frame{kind: fNumber, n: n}
		again, ok := s.number(top, b)
		return ok && !again
	case b == 't' && n.types&tBool != 0, b == 'f' && n.types&tBool != 0, b == 'n' && n.types&tNull != 0:
		i := 2
		switch b {
		case 't':
			i = 0
		case 'f':
			i = 1
		}
		*top = frame{kind: fLiteral, n: n, lit: literals[i : i+1], count: 1}
	default:
		return false
	}
	return true
}

// candEnd ends the properties that may be written next in a closed
// object: props[next:candEnd] runs up to and including the first required
// one.
func candEnd(n *node, next int) int {
	for i := next; i < len(n.props); i++ {
		if n.props[i].required {
			return i + 1
		}
	}
	return len(n.props)
}

func (s *state) object(f *frame, b byte) bool {
	if isWS(b) {
		if f.ws >= maxWS {
			return false
		}
		f.ws++
		return true
	}
	f.ws = 0
	n := f.n
	switch f.phase {
	case oKeyOrEnd:
		switch {
		case b == '"':
			var lit []string
			if !n.open {
				end := candEnd(n, f.next)
				if end == f.next {
					return false
				}
				lit = n.names[f.next:end]
			}
			s.stack = append(s.stack, frame{kind: fKey, n: n, lit: lit})
			return true
		case b == '}' && f.first && (n.open || objectRest(n, f.next, true) == 1):
			s.pop()
			return true
		}
	case oColon:
		if b != ':' {
			return false
		}
		f.phase = oValue
		vn := anyOpen
		if f.cur >= 0 {
			vn = n.props[f.cur].n
		}
		s.stack = append(s.stack, frame{kind: fValue, n: vn})
		return true
	case oCommaOrEnd:
		switch {
		case b == ',' && (n.open || candEnd(n, f.next) > f.next):
			f.phase = oKeyOrEnd
			return true
		case b == '}' && (n.open || objectRest(n, f.next, false) == 1):
			s.pop()
			return true
		}
	}
	return false
}

// anyOpen is the schema of a free key's value.
var anyOpen = func() *node { n := anyNode(); finish(n); return n }()

func (s *state) key(f *frame, b byte) bool {
	parent := &s.stack[len(s.stack)-2]
	if f.lit == nil { // a free key: any string
		ok := s.str(f, b)
		if ok && len(s.stack) > 0 && s.stack[len(s.stack)-1].kind != fKey {
			parent := &s.stack[len(s.stack)-1]
			parent.cur = -1
		}
		return ok
	}
	if b == '"' {
		i := f.ended()
		if i < 0 {
			return false
		}
		i += parent.next // lit is names[parent.next:]
		parent.cur, parent.next = i, i+1
		s.pop()
		return true
	}
	return f.step(b)
}

func (s *state) str(f *frame, b byte) bool {
	switch {
	case f.phase == 1: // after a backslash
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.phase = 0
		case 'u':
			f.phase = 2
		default:
			return false
		}
		f.count++
		return true
	case f.phase >= 2: // \uXXXX digits
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F') {
			return false
		}
		if f.phase++; f.phase == 6 {
			f.phase = 0
		}
		return true
	case f.u8 > 0: // inside a multi-byte UTF-8 character
		if b < f.u8lo || b > f.u8hi {
			return false
		}
		f.u8--
		f.u8lo, f.u8hi = 0x80, 0xBF
		return true
	case b == '"':
		if f.kind == fString && f.count < f.n.minLen {
			return false
		}
		s.pop()
		return true
	case b < 0x20:
		return false
	case b >= 0x80: // the lead byte of a multi-byte character (RFC 3629)
		f.u8lo, f.u8hi = 0x80, 0xBF
		switch {
		case b >= 0xC2 && b <= 0xDF:
			f.u8 = 1
		case b >= 0xE0 && b <= 0xEF:
			f.u8 = 2
			if b == 0xE0 {
				f.u8lo = 0xA0
			} else if b == 0xED {
				f.u8hi = 0x9F
			}
		case b >= 0xF0 && b <= 0xF4:
			f.u8 = 3
			if b == 0xF0 {
				f.u8lo = 0x90
			} else if b == 0xF4 {
				f.u8hi = 0x8F
			}
		default:
			return false
		}
	}
	if f.kind == fString && f.n.maxLen >= 0 && f.count >= f.n.maxLen {
		return false
	}
	f.count++
	if b == '\\' {
		f.phase = 1
	}
	return true
}

// number phases: 0 start, 1 after '-', 2 after a leading 0, 3 integer
// digits, 4 after '.', 5 fraction digits, 6 after e, 7 after the exponent
// sign, 8 exponent digits. 2, 3, 5 and 8 may end the number.
func numberEnds(phase int) bool { return phase == 2 || phase == 3 || phase == 5 || phase == 8 }

// number feeds b to a number; again: the number ended before b, which goes
// to the parent.
func (s *state) number(f *frame, b byte) (again, ok bool) {
	digit := b >= '0' && b <= '9'
	integer := f.n.types&tNumber == 0
	if digit && f.phase < 6 && f.count >= maxDigits {
		return false, false
	}
	if b == '.' && f.count >= maxDigits { // no room for a fraction digit
		return false, false
	}
	switch {
	case f.phase == 0 && b == '-':
		f.phase = 1
	case (f.phase == 0 || f.phase == 1) && b == '0':
		f.phase = 2
	case (f.phase == 0 || f.phase == 1) && digit:
		f.phase = 3
	case f.phase == 3 && digit:
	case (f.phase == 2 || f.phase == 3) && b == '.' && !integer:
		f.phase = 4
	case (f.phase == 4 || f.phase == 5) && digit:
		f.phase = 5
	case (f.phase == 2 || f.phase == 3 || f.phase == 5) && (b == 'e' || b == 'E') && !integer:
		f.phase = 6
	case f.phase == 6 && (b == '+' || b == '-'):
		f.phase = 7
	case f.phase >= 6 && digit && f.exp < 2:
		f.phase = 8
		f.exp++
	case numberEnds(f.phase):
		if len(s.stack) == 1 {
			return false, false
		}
		s.pop()
		return true, true
	default:
		return false, false
	}
	if digit && f.phase < 6 {
		f.count++
	}
	return false, true
}

// literal feeds b to true/false/null or an enum text.
func (s *state) literal(f *frame, b byte) (again, ok bool) {
	if f.step(b) {
		s.literalDone(f)
		return false, true
	}
	// a candidate that ended here (an enum number followed by a delimiter)
	if len(s.stack) > 1 && f.ended() >= 0 {
		s.pop()
		return true, true
	}
	return false, false
}

// literalDone pops a literal frame once its only alive candidate is
// complete (candidates that are prefixes of others wait for the next
// byte).
func (s *state) literalDone(f *frame) {
	n := 0
	for _, c := range f.lit {
		if f.alive(c) {
			n++
		}
	}
	if n == 1 && len(f.lit[f.ref]) == f.count {
		s.pop()
	}
}

// complete reports whether the document may end here.
func (s *state) complete() bool {
	if s.done {
		return true
	}
	if len(s.stack) != 1 {
		return false
	}
	f := s.stack[0]
	switch f.kind {
	case fNumber:
		return numberEnds(f.phase)
	case fLiteral:
		return f.ended() >= 0
	}
	return false
}

// cost is the length of the shortest text that completes the document.
func (s *state) cost() int {
	if s.complete() {
		return 0
	}
	c := 0
	for i := len(s.stack) - 1; i >= 0; i-- {
		f := &s.stack[i]
		n := f.n
		switch f.kind {
		case fValue:
			c += n.min
		case fString:
			c += strCost(f)
			if f.kind == fString && f.count < n.minLen {
				c += n.minLen - f.count
			}
		case fKey:
			if f.lit == nil { // free key: the quote, ':', a value, '}'
				c += strCost(f) + 1 + anyOpen.min + 1
				i-- // the object's part is included
				continue
			}
			// the shortest way through a candidate key, its value and the
			// required properties after it (the object adds '}')
			parent := &s.stack[i-1]
			best := math.MaxInt32
			for j := parent.next; j < candEnd(parent.n, parent.next); j++ {
				p := parent.n.props[j]
				if !f.alive(p.name) {
					continue
				}
				best = min(best, len(p.name)-f.count+2+p.n.min+objectRest(parent.n, j+1, false)-1)
			}
			c += best
			i-- // the object's part is included (but its '}')
			c++
		case fObject:
			switch f.phase {
			case oKeyOrEnd:
				if f.first {
					c += objectRest(n, f.next, true)
				} else { // after ',': a property must follow
					best := math.MaxInt32
					for j := f.next; j < candEnd(n, f.next); j++ {
						best = min(best, propCost(n.props[j], true)+objectRest(n, j+1, false))
					}
					if n.open {
						best = 2 + 1 + anyOpen.min + 1
					}
					c += best
				}
			case oColon:
				vn := anyOpen
				if f.cur >= 0 {
					vn = n.props[f.cur].n
				}
				c += 1 + vn.min + rest(f)
			case oValue:
				c += rest(f)
			case oCommaOrEnd:
				c += objectRest(n, f.next, false)
			}
		case fArray:
			items := f.count
			switch {
			case f.phase == 3: // an item is being written (its frame counts itself)
				c += arrayRest(n, items+1, false)
			case f.phase == 2: // after ','
				c += n.items.min + arrayRest(n, items+1, false)
			case f.phase == 0:
				c += arrayRest(n, 0, true)
			default:
				c += arrayRest(n, items, false)
			}
		case fNumber:
			switch f.phase {
			case 0, 1, 4, 6, 7:
				c++
			}
		case fLiteral:
			best := math.MaxInt32
			for _, l := range f.lit {
				if f.alive(l) {
					best = min(best, len(l)-f.count)
				}
			}
			c += best
		}
	}
	return c
}

// array feeds b to an array: phase 0 after '[', 1 after an item, 2 after
// ',', 3 while an item is written; again: b starts an item (a value frame
// was pushed for it).
func (s *state) array(f *frame, b byte) (again, ok bool) {
	n := f.n
	if isWS(b) && f.phase != 3 {
		if f.ws >= maxWS {
			return false, false
		}
		f.ws++
		return false, true
	}
	f.ws = 0
	switch f.phase {
	case 0, 2:
		if f.phase == 0 && b == ']' {
			if n.minItems > 0 {
				return false, false
			}
			s.pop()
			return false, true
		}
		if n.maxItems >= 0 && f.count >= n.maxItems {
			return false, false
		}
		f.phase = 3
		s.stack = append(s.stack, frame{kind: fValue, n: n.items})
		return true, true
	case 1:
		switch {
		case b == ',' && (n.maxItems < 0 || f.count < n.maxItems):
			f.phase = 2
			return false, true
		case b == ']' && f.count >= n.minItems:
			s.pop()
			return false, true
		}
	}
	return false, false
}

// strCost is the rest of a string: its closing quote (and an escape in
// progress).
func strCost(f *frame) int {
	switch {
	case f.phase == 1:
		return 2
	case f.phase >= 2:
		return 6 - f.phase + 1
	}
	return 1 + f.u8
}

// rest is an object's shortest rest once the current property's value is
// written (the value itself is counted by its own frame).
func rest(f *frame) int {
	if f.cur < 0 || f.n.open {
		return 1
	}
	return objectRest(f.n, f.next, false)
}

// arrayRest is an array's shortest rest holding items items: the missing
// minItems (each with its comma), then ']'.
func arrayRest(n *node, items int, first bool) int {
	c := 1
	for k := items; k < n.minItems; k++ {
		c += n.items.min
		if !first || k > items {
			c++
		}
		first = false
	}
	return c
}
