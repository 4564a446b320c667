// Package grammar constrains generated text to JSON — any JSON object, or
// JSON matching a schema (a subset of JSON Schema) — by masking the logits
// of tokens that cannot continue a valid document (as llama.cpp's GBNF
// grammars and OpenAI's structured outputs do). The mask also closes the
// document in time: a token is allowed only if the shortest completion
// after it still fits in the tokens left, so every output that ends within
// max_tokens parses and validates.
package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// type bits of a node
const (
	tObject = 1 << iota
	tArray
	tString
	tNumber
	tInteger
	tBool
	tNull
	tAny = tObject | tArray | tString | tNumber | tInteger | tBool | tNull
)

// node is one compiled (sub)schema.
type node struct {
	types int
	// object: props in schema order; closed objects hold only these.
	props    []prop
	open     bool // any keys with any values (no properties given)
	items    *node
	minItems int
	maxItems int // −1: unbounded
	minLen   int
	maxLen   int      // −1: unbounded
	enum     []string // JSON texts of the allowed values (enum/const)
	names    []string // the props' names (a key's candidates)
	min      int      // shortest JSON text of a value
}

type prop struct {
	name     string
	required bool
	n        *node
}

// Grammar is a compiled response format.
type Grammar struct {
	root *node
}

// anyNode accepts any JSON value.
func anyNode() *node {
	n := &node{types: tAny, open: true, maxItems: -1, maxLen: -1}
	n.items = n
	return n
}

// JSONObject is the grammar of OpenAI's response_format json_object: any
// JSON object.
func JSONObject() *Grammar {
	n := anyNode()
	n.types = tObject
	finish(n)
	return &Grammar{root: n}
}

// annotations are JSON Schema keywords that do not constrain values.
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "format": true, "strict": true, "additionalProperties": true}

// Schema compiles a JSON Schema: type (one or a list), properties,
// required, items, minItems, maxItems, minLength, maxLength, enum, const.
// Objects with properties hold only those (as in OpenAI's strict mode),
// written in the order the schema lists them; other keywords that would
// constrain values (pattern, minimum, $ref, anyOf, …) are refused by name.
func Schema(raw []byte) (*Grammar, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("json_schema: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json_schema: data after the schema")
	}
	n, err := compile(v, "schema")
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n}, nil
}

func compile(v any, where string) (*node, error) {
	if b, ok := v.(bool); ok && b {
		n := anyNode()
		finish(n)
		return n, nil
	}
	s, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("json_schema: %s: want an object", where)
	}
	n := &node{maxItems: -1, maxLen: -1}
	var keys []string
	for k := range s {
		if k != orderKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "type", "properties", "required", "items", "minItems", "maxItems", "minLength", "maxLength", "enum", "const", "propertyOrdering":
		default:
			if !annotations[k] {
				return nil, fmt.Errorf("json_schema: %s: keyword %q is not supported (supported: type, properties, required, items, minItems, maxItems, minLength, maxLength, enum, const)", where, k)
			}
		}
	}
	switch t := s["type"].(type) {
	case nil:
		n.types = tAny
	case string:
		b, err := typeBit(t, where)
		if err != nil {
			return nil, err
		}
		n.types = b
	case []any:
		for _, x := range t {
			ts, _ := x.(string)
			b, err := typeBit(ts, where)
			if err != nil {
				return nil, err
			}
			n.types |= b
		}
	default:
		return nil, fmt.Errorf("json_schema: %s: type must be a string or a list of strings", where)
	}
	if n.types&tInteger != 0 && n.types&tNumber != 0 {
		n.types &^= tInteger
	}
	intOf := func(k string, def int) (int, error) {
		x, ok := s[k]
		if !ok {
			return def, nil
		}
		jn, _ := x.(json.Number)
		f, err := jn.Float64()
		if err != nil || f < 0 || f != math.Trunc(f) || f > 1e6 {
			return 0, fmt.Errorf("json_schema: %s: %s must be a non-negative integer", where, k)
		}
		return int(f), nil
	}
	var err error
	if n.minItems, err = intOf("minItems", 0); err != nil {
		return nil, err
	}
	if n.maxItems, err = intOf("maxItems", -1); err != nil {
		return nil, err
	}
	if n.minLen, err = intOf("minLength", 0); err != nil {
		return nil, err
	}
	if n.maxLen, err = intOf("maxLength", -1); err != nil {
		return nil, err
	}
	if (n.maxItems >= 0 && n.maxItems < n.minItems) || (n.maxLen >= 0 && n.maxLen < n.minLen) {
		return nil, fmt.Errorf("json_schema: %s: a maximum is below its minimum", where)
	}
	var vals []any
	if c, ok := s["const"]; ok {
		vals = []any{c}
	}
	if e, ok := s["enum"]; ok {
		l, ok := e.([]any)
		if !ok || len(l) == 0 {
			return nil, fmt.Errorf("json_schema: %s: enum must be a non-empty list", where)
		}
		vals = append(vals, l...)
	}
	for _, x := range vals {
		b, err := json.Marshal(plain(x))
		if err != nil {
			return nil, fmt.Errorf("json_schema: %s: enum: %w", where, err)
		}
		n.enum = append(n.enum, canonical(b))
	}
	if n.types&tObject != 0 {
		props, _ := s["properties"].(map[string]any)
		if _, has := s["properties"]; has && props == nil {
			return nil, fmt.Errorf("json_schema: %s: properties must be an object", where)
		}
		req := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				name, _ := x.(string)
				if _, ok := props[name]; !ok {
					return nil, fmt.Errorf("json_schema: %s: required property %q is not in properties", where, name)
				}
				req[name] = true
			}
		}
		order := orderedKeys(s)
		if len(order) == 0 {
			n.open = true
		}
		// schema order: the order of the properties object as written
		for _, name := range order {
			// written as they are: no quote, backslash or control character
			// (raw controls are not JSON; DEL may have no token)
			if strings.ContainsAny(name, "\"\\") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) ||
				!utf8.ValidString(name) {
				return nil, fmt.Errorf("json_schema: %s: property name %q needs escaping: not supported", where, name)
			}
			c, err := compile(props[name], where+"."+name)
			if err != nil {
				return nil, err
			}
			n.props = append(n.props, prop{name: name, required: req[name], n: c})
		}
	}
	if n.types&tArray != 0 {
		if it, ok := s["items"]; ok {
			if n.items, err = compile(it, where+"[]"); err != nil {
				return nil, err
			}
		} else {
			n.items = anyNode()
			finish(n.items)
		}
	}
	finish(n)
	return n, nil
}

// orderedKeys returns the names under "properties" in the order they were
// written ("propertyOrdering" overrides).
func orderedKeys(s map[string]any) []string {
	props, _ := s["properties"].(map[string]any)
	if po, ok := s["propertyOrdering"].([]any); ok {
		var out []string
		for _, x := range po {
			if name, _ := x.(string); props[name] != nil {
				out = append(out, name)
			}
		}
		if len(out) == len(props)-1 {
			return out
		}
	}
	raw, _ := props[orderKey].([]string)
	if len(raw) == 0 && len(props) > 0 { // not decoded by decodeOrdered
		for k := range props {
			raw = append(raw, k)
		}
		sort.Strings(raw)
	}
	return raw
}

// orderKey holds, in each decoded object, its keys in written order.
const orderKey = "\x00order"

// decodeOrdered decodes one JSON value like json.Unmarshal into any (with
// json.Number), recording each object's key order under orderKey.
func decodeOrdered(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		m := map[string]any{}
		var order []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			ks, _ := k.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := m[ks]; !dup {
				order = append(order, ks)
			}
			m[ks] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		m[orderKey] = order
		return m, nil
	case json.Delim('['):
		l := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return l, nil
	}
	return t, nil
}

// plain drops the key-order records of a decoded value.
func plain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			if k != orderKey {
				m[k] = plain(e)
			}
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = plain(e)
		}
		return l
	}
	return v
}

// canonical re-encodes JSON text as encoding/json writes a decoded value
// (numbers as float64), so equal values compare equal, with DEL (U+007F,
// which encoding/json leaves raw) escaped as \u007f like the other
// control characters: a vocabulary without the raw byte (the test's, or a
// tokenizer without byte fallback) can still write the value. DEL only
// occurs inside strings, so the replacement keeps the text's meaning.
func canonical(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	c, _ := json.Marshal(v)
	return strings.ReplaceAll(string(c), "\x7f", `\u007f`)
}

func typeBit(t, where string) (int, error) {
	switch t {
	case "object":
		return tObject, nil
	case "array":
		return tArray, nil
	case "string":
		return tString, nil
	case "number":
		return tNumber, nil
	case "integer":
		return tInteger, nil
	case "boolean":
		return tBool, nil
	case "null":
		return tNull, nil
	}
	return 0, fmt.Errorf("json_schema: %s: unknown type %q", where, t)
}

// finish computes the shortest JSON text of a value of n.
func finish(n *node) {
	n.names = n.names[:0]
	for _, p := range n.props {
		n.names = append(n.names, p.name)
	}
	if n.enum != nil {
		n.min = math.MaxInt32
		for _, e := range n.enum {
			n.min = min(n.min, len(e))
		}
		return
	}
	best := math.MaxInt32
	if n.types&(tNumber|tInteger) != 0 {
		best = 1
	}
	if n.types&tNull != 0 {
		best = min(best, 4)
	}
	if n.types&tBool != 0 {
		best = min(best, 4)
	}
	if n.types&tString != 0 {
		best = min(best, 2+n.minLen)
	}
	if n.types&tArray != 0 {
		c := 2
		if n.minItems > 0 {
			c += n.minItems*n.items.min + n.minItems - 1
		}
		best = min(best, c)
	}
	if n.types&tObject != 0 {
		best = min(best, 1+objectRest(n, 0, true))
	}
	n.min = best
}

// objectRest is the shortest rest of an object after '{' (first) or after
// a value, when the next property to consider is props[i]: the required
// properties from i on, then '}'.
func objectRest(n *node, i int, first bool) int {
	c := 1
	for _, p := range n.props[i:] {
		if p.required {
			c += propCost(p, first)
			first = false
		}
	}
	return c
}

// propCost is the length of `,"name":value` (no comma for the first).
func propCost(p prop, first bool) int {
	c := len(p.name) + 3 + p.n.min
	if !first {
		c++
	}
	return c
}

// Validate reports whether doc is JSON text valid for the grammar,
// naming what is wrong.
func (g *Grammar) Validate(doc []byte) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return validate(g.root, v, "$")
}

func validate(n *node, v any, where string) error {
	if n.enum != nil {
		b, _ := json.Marshal(v)
		if !slices.Contains(n.enum, canonical(b)) {
			return fmt.Errorf("%s: %s is not one of %v", where, b, n.enum)
		}
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		if n.types&tObject == 0 {
			return fmt.Errorf("%s: an object is not allowed", where)
		}
		if n.open {
			return nil
		}
		for k := range x {
			if !slices.ContainsFunc(n.props, func(p prop) bool { return p.name == k }) {
				return fmt.Errorf("%s: unexpected property %q", where, k)
			}
		}
		for _, p := range n.props {
			pv, ok := x[p.name]
			if !ok {
				if p.required {
					return fmt.Errorf("%s: missing required property %q", where, p.name)
				}
				continue
			}
			if err := validate(p.n, pv, where+"."+p.name); err != nil {
				return err
			}
		}
	case []any:
		if n.types&tArray == 0 {
			return fmt.Errorf("%s: an array is not allowed", where)
		}
		if len(x) < n.minItems || (n.maxItems >= 0 && len(x) > n.maxItems) {
			return fmt.Errorf("%s: %d items outside [%d, %d]", where, len(x), n.minItems, n.maxItems)
		}
		for i, it := range x {
			if err := validate(n.items, it, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
	case string:
		if n.types&tString == 0 {
			return fmt.Errorf("%s: a string is not allowed", where)
		}
		l := utf8.RuneCountInString(x)
		if l < n.minLen || (n.maxLen >= 0 && l > n.maxLen) {
			return fmt.Errorf("%s: string of %d characters outside [%d, %d]", where, l, n.minLen, n.maxLen)
		}
	case float64:
		switch {
		case n.types&tNumber != 0:
		case n.types&tInteger != 0 && x == math.Trunc(x):
		default:
			return fmt.Errorf("%s: the number %v is not allowed", where, x)
		}
	case bool:
		if n.types&tBool == 0 {
			return fmt.Errorf("%s: a boolean is not allowed", where)
		}
	case nil:
		if n.types&tNull == 0 {
			return fmt.Errorf("%s: null is not allowed", where)
		}
	}
	return nil
}
