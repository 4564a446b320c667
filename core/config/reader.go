package config

import (
	"encoding/json"
	"math"
)

// reader pulls typed fields out of a decoded JSON object, remembering the
// first error (which names the field with its full path).
type reader struct {
	m      map[string]any
	prefix string
	err    error
}

func (r *reader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = fieldErr(r.prefix+field, format, args...)
	}
}

func (r *reader) get(field string) (any, bool) {
	if r.m == nil {
		return nil, false
	}
	v, ok := r.m[field]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

func (r *reader) float(field string) (float64, bool) {
	v, ok := r.get(field)
	if !ok {
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		r.fail(field, "want a number, got %T", v)
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		r.fail(field, "bad number %s", n)
		return 0, false
	}
	return f, true
}

func (r *reader) floatOr(field string, def float64) float64 {
	if f, ok := r.float(field); ok {
		return f
	}
	return def
}

func (r *reader) intOr(field string, def int) int {
	f, ok := r.float(field)
	if !ok {
		return def
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		r.fail(field, "want an integer, got %v", f)
		return def
	}
	return int(f)
}

func (r *reader) posInt(field string) int {
	if _, ok := r.get(field); !ok {
		r.fail(field, "missing")
		return 0
	}
	v := r.intOr(field, 0)
	if v <= 0 {
		r.fail(field, "must be positive, got %d", v)
	}
	return v
}

func (r *reader) boolOr(field string, def bool) bool {
	v, ok := r.get(field)
	if !ok {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		r.fail(field, "want true or false, got %T", v)
		return def
	}
	return b
}

func (r *reader) stringOr(field, def string) string {
	v, ok := r.get(field)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail(field, "want a string, got %T", v)
		return def
	}
	return s
}

// intList reads an integer or a list of integers.
func (r *reader) intList(field string) []int {
	v, ok := r.get(field)
	if !ok {
		return nil
	}
	switch x := v.(type) {
	case json.Number:
		return []int{r.intOr(field, 0)}
	case []any:
		out := make([]int, 0, len(x))
		for _, e := range x {
			n, isNum := e.(json.Number)
			i, err := n.Int64()
			if !isNum || err != nil || i < math.MinInt32 || i > math.MaxInt32 {
				r.fail(field, "want a list of integers, found %v", e)
				return nil
			}
			out = append(out, int(i))
		}
		return out
	}
	r.fail(field, "want an integer or a list of integers, got %T", v)
	return nil
}

func (r *reader) object(field string) reader {
	sub := reader{prefix: r.prefix + field + "."}
	v, ok := r.get(field)
	if !ok {
		return sub
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		r.fail(field, "want an object, got %T", v)
		return sub
	}
	sub.m = m
	return sub
}
