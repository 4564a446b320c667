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
	// startsSpace[i]: the first text at or after segment i starts with
	// whitespace; endsSpace[i]: the last text at or before i ends with it.
	startsSpace, endsSpace := make([]bool, len(segs)+1), make([]bool, len(segs))
	for i := len(segs) - 1; i >= 0; i-- {
		startsSpace[i] = startsSpace[i+1]
		if segs[i].tag == 0 {
			startsSpace[i] = isSpace(src[segs[i].start])
		}
	}
	for i, sg := range segs {
		if sg.tag == 0 {
			endsSpace[i] = isSpace(src[sg.end-1])
		} else if i > 0 {
			endsSpace[i] = endsSpace[i-1]
		}
	}
	var b strings.Builder
	last := 0
	for i := 0; i+1 < len(segs); i++ {
		a, c := segs[i], segs[i+1]
		if a.tag == 0 || c.tag == 0 {
			continue
		}
		if (a.trimsRight() && startsSpace[i+2]) || (c.trimsLeft() && i > 0 && endsSpace[i-1]) {
			b.WriteString(src[last:a.end])
			b.WriteString(guard)
			last = a.end
		}
	}
	b.WriteString(src[last:])
	return b.String()
}
