package chat

import "strings"

// segment is a piece of template source: text, or a tag ({{ }}, {% %},
// {# #}) with its whitespace-control marks.
type segment struct {
	tag                 byte // 0 for text, else '{', '%' or '#'
	start, end          int
	trimLeft, trimRight bool // {%- / -%} (and the {{ }} and {# #} forms)
}

// trimsLeft: the tag strips whitespace of the text before it (an explicit
// "-", or lstrip_blocks on a statement or comment).
func (s segment) trimsLeft() bool { return s.trimLeft || s.tag == '%' || s.tag == '#' }

// trimsRight: the tag strips whitespace of the text after it (an explicit
// "-", or trim_blocks on a statement or comment).
func (s segment) trimsRight() bool { return s.trimRight || s.tag == '%' || s.tag == '#' }

// scanSegments splits src into text and tags the way the Jinja lexer
// does: a tag runs to its closer, skipping quoted strings inside {{ }} and
// {% %}. An unclosed tag ends the scan (the compiler reports it).
func scanSegments(src string) []segment {
	var segs []segment
	text := 0
	for i := 0; i+1 < len(src); {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		kind := src[i+1]
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		if i > text {
			segs = append(segs, segment{start: text, end: i})
		}
		s := segment{tag: kind, start: i}
		j := i + 2
		if j < len(src) && src[j] == '-' {
			s.trimLeft = true
			j++
		}
		closed := false
		for j < len(src) {
			c := src[j]
			if kind != '#' && (c == '\'' || c == '"') {
				j++
				for j < len(src) && src[j] != c {
					if src[j] == '\\' {
						j++
					}
					j++
				}
				j++
				continue
			}
			if strings.HasPrefix(src[j:], closer) {
				s.trimRight = src[j-1] == '-' && j-1 >= s.start+2+boolInt(s.trimLeft)
				j += 2
				closed = true
				break
			}
			j++
		}
		if !closed {
			return segs
		}
		s.end = j
		segs = append(segs, s)
		i, text = j, j
	}
	if text < len(src) {
		segs = append(segs, segment{start: text, end: len(src)})
	}
	return segs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// guardTags inserts the guard between two adjacent tags where the
// engine would otherwise trim whitespace of a text beyond them: the left
// tag trims rightwards and the next text starts with whitespace, or the
// right tag trims leftwards and the previous text ends with whitespace.
func guardTags(src string) string {
	segs := scanSegments(src)
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	var b strings.Builder
	last := 0
	for i := 0; i+1 < len(segs); i++ {
		a, c := segs[i], segs[i+1]
		if a.tag == 0 || c.tag == 0 {
			continue
		}
		need := false
		if a.trimsRight() {
			for _, t := range segs[i+2:] {
				if t.tag == 0 {
					need = isSpace(src[t.start])
					break
				}
			}
		}
		if !need && c.trimsLeft() {
			for k := i - 1; k >= 0; k-- {
				if t := segs[k]; t.tag == 0 {
					need = isSpace(src[t.end-1])
					break
				}
			}
		}
		if need {
			b.WriteString(src[last:a.end])
			b.WriteString(guard)
			last = a.end
		}
	}
	b.WriteString(src[last:])
	return b.String()
}
