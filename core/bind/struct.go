package bind

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/tensor"
)

// Struct binds the fields of the struct v points to from their struct
// tags, each tensor named once:
//
//	ckpt:"name"     the tensor (or, for a nested struct, the name prefix)
//	                under prefix; []float32 fields bind vectors (Vec),
//	                *tensor.Mat fields matrices (MatShape)
//	shape:"A,B,…"   the expected shape: symbols of dims or integers
//	if:"c" / "!c"   bind only when conds[c] is true / false (else nil)
//	n:"sym"         a slice of structs: dims[sym] elements, element i
//	                under name.i.
//	with:"x=Y,c=!d" a nested struct's symbols: dims[x] = dims[Y] (or an
//	                integer), conds[c] = !conds[d] (or true / false)
//
// Pointer-to-struct fields are allocated when bound. Fields without a
// ckpt tag are left alone.
func (b *Binder) Struct(prefix string, v any, dims map[string]int, conds map[string]bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		b.fail(fmt.Errorf("bind: Struct wants a pointer to a struct, got %T", v))
		return
	}
	b.bindStruct(prefix, rv.Elem(), dims, conds)
}

func (b *Binder) fail(err error) {
	if b.Err == nil {
		b.Err = err
	}
}

var (
	matType = reflect.TypeFor[*tensor.Mat]()
	vecType = reflect.TypeFor[[]float32]()
)

func (b *Binder) bindStruct(prefix string, sv reflect.Value, dims map[string]int, conds map[string]bool) {
	st := sv.Type()
	for i := 0; i < st.NumField() && b.Err == nil; i++ {
		f := st.Field(i)
		name, ok := f.Tag.Lookup("ckpt")
		if !ok {
			continue
		}
		if c := f.Tag.Get("if"); c != "" && !cond(c, conds) {
			continue
		}
		fv := sv.Field(i)
		full := prefix + name
		switch {
		case f.Type == matType || f.Type == vecType:
			shape, err := parseShape(f.Tag.Get("shape"), dims)
			if err != nil {
				b.fail(fmt.Errorf("bind: %s: %w", full, err))
				return
			}
			if f.Type == matType {
				if m := b.MatShape(full, shape...); m != nil {
					fv.Set(reflect.ValueOf(m))
				}
			} else if x := b.Vec(full, shape...); x != nil {
				fv.Set(reflect.ValueOf(x))
			}
		case f.Type.Kind() == reflect.Struct, f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			d, c, err := scope(f.Tag.Get("with"), dims, conds)
			if err != nil {
				b.fail(fmt.Errorf("bind: %s: %w", full, err))
				return
			}
			if f.Type.Kind() == reflect.Pointer {
				fv.Set(reflect.New(f.Type.Elem()))
				fv = fv.Elem()
			}
			b.bindStruct(full+".", fv, d, c)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			n, ok := dims[f.Tag.Get("n")]
			if !ok {
				b.fail(fmt.Errorf("bind: %s: no length %q", full, f.Tag.Get("n")))
				return
			}
			fv.Set(reflect.MakeSlice(f.Type, n, n))
			for j := 0; j < n && b.Err == nil; j++ {
				b.bindStruct(fmt.Sprintf("%s.%d.", full, j), fv.Index(j), dims, conds)
			}
		default:
			b.fail(fmt.Errorf("bind: %s: cannot bind a field of type %s", full, f.Type))
			return
		}
	}
}

// cond evaluates "c" or "!c".
func cond(c string, conds map[string]bool) bool {
	if neg, ok := strings.CutPrefix(c, "!"); ok {
		return !conds[neg]
	}
	return conds[c]
}

func parseShape(s string, dims map[string]int) ([]int, error) {
	if s == "" {
		return nil, fmt.Errorf("no shape tag")
	}
	var shape []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if n, err := strconv.Atoi(p); err == nil {
			shape = append(shape, n)
			continue
		}
		n, ok := dims[p]
		if !ok {
			return nil, fmt.Errorf("unknown dimension %q", p)
		}
		shape = append(shape, n)
	}
	return shape, nil
}

// scope applies a nested struct's "with" assignments to copies of dims
// and conds.
func scope(with string, dims map[string]int, conds map[string]bool) (map[string]int, map[string]bool, error) {
	if with == "" {
		return dims, conds, nil
	}
	d, c := make(map[string]int, len(dims)), make(map[string]bool, len(conds))
	for k, v := range dims {
		d[k] = v
	}
	for k, v := range conds {
		c[k] = v
	}
	for _, a := range strings.Split(with, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(a), "=")
		if !ok {
			return nil, nil, fmt.Errorf("bad with %q", a)
		}
		switch {
		case v == "true" || v == "false":
			c[k] = v == "true"
		case strings.HasPrefix(v, "!"):
			c[k] = !conds[v[1:]]
		default:
			if n, err := strconv.Atoi(v); err == nil {
				d[k] = n
			} else if n, ok := dims[v]; ok {
				d[k] = n
			} else if cv, ok := conds[v]; ok {
				c[k] = cv
			} else {
				return nil, nil, fmt.Errorf("unknown symbol %q", v)
			}
		}
	}
	return d, c, nil
}
