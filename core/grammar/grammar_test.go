package grammar

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// testTokens is a vocabulary of every printable ASCII byte, some longer
// pieces a JSON document is made of, and a stop token (the last id).
func testTokens() (*Tokens, int) {
	var texts []string
	for b := 0x20; b < 0x7f; b++ {
		texts = append(texts, string(rune(b)))
	}
	for b := 0x80; b < 0x100; b++ { // single bytes: parts of UTF-8 characters
		texts = append(texts, string([]byte{byte(b)}))
	}
	texts = append(texts, "\n", "{\"", "\":", "\",", "true", "null", "name", "age", "12", "é", "\"}", "[1", "],", "<|im_end|>")
	t := &Tokens{Text: texts, usable: make([]bool, len(texts))}
	for i := range texts {
		t.usable[i] = i < len(texts)-1
	}
	return t, len(texts) - 1
}

// generate samples from random logits under the constraint until the stop
// token or maxTok tokens, and returns the text.
func generate(t *testing.T, g *Grammar, seed uint64, maxTok int) (string, bool) {
	t.Helper()
	tok, stop := testTokens()
	c, err := NewConstraint(g, tok, []int{stop})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var out strings.Builder
	logits := make([]float32, len(tok.Text))
	for n := 0; n < maxTok; n++ {
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		c.Mask(logits, maxTok-n)
		best, bv := -1, float32(math.Inf(-1))
		for i, v := range logits {
			if v > bv {
				best, bv = i, v
			}
		}
		if best < 0 {
			t.Fatalf("seed %d: every token masked after %q", seed, out.String())
		}
		if best == stop {
			return out.String(), true
		}
		if err := c.Accept(best); err != nil {
			t.Fatal(err)
		}
		out.WriteString(tok.Text[best])
	}
	return out.String(), c.Complete()
}

func TestConstrainedOutputValidates(t *testing.T) {
	person := `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},
		"tags":{"type":"array","items":{"enum":["a","b",3]},"minItems":1,"maxItems":3},
		"ok":{"type":"boolean"},"note":{"type":["string","null"]},"score":{"type":"number"}},
		"required":["name","age","tags"]}`
	cases := []struct {
		name   string
		schema string // "" for json_object
		budget []int
	}{
		{"json_object", "", []int{8, 20, 64}},
		{"person", person, []int{40, 64, 200}},
		{"nested", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"number"}}},"required":["b"]}},"required":["a"]}`, []int{16, 40}},
		{"root array", `{"type":"array","items":{"type":"string"},"minItems":2}`, []int{8, 30}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := JSONObject()
			if tc.schema != "" {
				var err error
				if g, err = Schema([]byte(tc.schema)); err != nil {
					t.Fatal(err)
				}
			}
			tok, stop := testTokens()
			c, _ := NewConstraint(g, tok, []int{stop})
			for _, budget := range tc.budget {
				if budget < c.MinTokens() {
					continue
				}
				for seed := uint64(0); seed < 40; seed++ {
					out, complete := generate(t, g, seed, budget)
					if !complete {
						t.Fatalf("budget %d seed %d: incomplete %q", budget, seed, out)
					}
					if err := g.Validate([]byte(out)); err != nil {
						t.Fatalf("budget %d seed %d: %q: %v", budget, seed, out, err)
					}
					if tc.schema == "" {
						var m map[string]any
						if err := json.Unmarshal([]byte(out), &m); err != nil {
							t.Fatalf("not an object: %q", out)
						}
					}
				}
			}
		})
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"pattern":"x"}}}`, `{"type":"wat"}`, `[`,
		`{"type":"object","properties":{"a":{}},"required":["b"]}`, `{"$ref":"#/x"}`, `{"enum":[]}`} {
		if _, err := Schema([]byte(s)); err == nil {
			t.Errorf("Schema(%s) succeeded", s)
		}
	}
}

func TestMinTokens(t *testing.T) {
	g, err := Schema([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	if err != nil {
		t.Fatal(err)
	}
	tok, stop := testTokens()
	c, _ := NewConstraint(g, tok, []int{stop})
	if got, want := c.MinTokens(), len(`{"name":""}`); got != want {
		t.Errorf("MinTokens %d, want %d", got, want)
	}
}

// Any schema the compiler takes yields, for any budget it fits in and any
// logits, a complete document that validates.
func FuzzSchemaOutput(f *testing.F) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"type":"string"},"b":{"enum":["x","ÿé",1,null]}},"required":["b"]}`,
		`{"type":"array","items":{"type":["integer","null"]},"minItems":2,"maxItems":3}`, `{"type":"string","minLength":3,"maxLength":5}`,
		`{"const":{"k":[1,2]}}`, `{}`, `{"type":"number"}`, `{"type":"object"}`} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, schema string, seed uint64) {
		g, err := Schema([]byte(schema))
		if err != nil {
			return
		}
		tok, stop := testTokens()
		c, err := NewConstraint(g, tok, []int{stop})
		if err != nil {
			t.Fatal(err)
		}
		min := c.MinTokens()
		if min > 300 {
			return
		}
		budget := max(1, min+int(seed%40))
		out, complete := generate(t, g, seed, budget)
		if !complete {
			t.Fatalf("budget %d: incomplete %q", budget, out)
		}
		if err := g.Validate([]byte(out)); err != nil {
			t.Fatalf("budget %d: %q: %v", budget, out, err)
		}
	})
}

// A constrained step (Mask over the vocabulary, then Accept) allocates
// nothing, whatever the document is in: object keys, enum and literal
// candidates, strings, numbers, arrays, a free key of an open object.
func TestConstraintAllocatesNothingPerToken(t *testing.T) {
	g, err := Schema([]byte(`{"type":"object","properties":{"name":{"type":"string"},"kind":{"enum":["a","ab",12]},
		"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":["integer","null"]}},"extra":{"type":"object"}},
		"required":["name","kind"]}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"name":"x\u00e9é","kind":"ab","ok":false,"tags":[1,null,-25],"extra":{"k":[true,2.5e3,{"z":"y"}]}}`
	tok, stop := testTokens()
	var ids []int
	for i := range len(doc) { // the single-byte tokens
		if b := int(doc[i]); b < 0x80 {
			ids = append(ids, b-0x20)
		} else {
			ids = append(ids, 0x7f-0x20+b-0x80)
		}
	}
	ids = append(ids, stop)
	c, err := NewConstraint(g, tok, []int{stop})
	if err != nil {
		t.Fatal(err)
	}
	start := c.st.clone(nil)
	logits := make([]float32, len(tok.Text))
	allocs := testing.AllocsPerRun(5, func() {
		c.st = start.clone(c.st.stack)
		for n, id := range ids {
			clear(logits)
			c.Mask(logits, len(ids)-n)
			if math.IsInf(float64(logits[id]), -1) {
				t.Fatalf("token %d (%q) masked after %q", n, tok.Text[id], doc[:n])
			}
			if err := c.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per %d-token document, want none", allocs, len(ids))
	}
}

// A value holding DEL (U+007F, a byte the test vocabulary lacks, as some
// tokenizers do) is written escaped, \u007f, and the output completes and
// validates (FuzzSchemaOutput found every token masked after `{"`); a
// property name with a control character is refused as one that needs
// escaping.
func TestSchemaEscapesDEL(t *testing.T) {
	for _, s := range []string{`{"type":"object","properties":{"k\u007f":{"type":"null"}}}`,
		`{"type":"object","properties":{"k\u0001":{"type":"null"}}}`} {
		if _, err := Schema([]byte(s)); err == nil || !strings.Contains(err.Error(), "needs escaping") {
			t.Errorf("Schema(%s): %v, want a property name that needs escaping", s, err)
		}
	}
	for _, s := range []string{`{"const":{"\u007f":[]}}`, `{"enum":["a\u007fb",1]}`} {
		g, err := Schema([]byte(s))
		if err != nil {
			t.Fatalf("Schema(%s): %v", s, err)
		}
		for seed := range uint64(4) {
			out, complete := generate(t, g, seed, 60)
			if !complete {
				t.Fatalf("%s: incomplete %q", s, out)
			}
			if err := g.Validate([]byte(out)); err != nil {
				t.Fatalf("%s: %q: %v", s, out, err)
			}
		}
	}
}
