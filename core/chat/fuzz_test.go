package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTemplate: any template text and message either fails with an error
// or renders; the guard Parse inserts is invisible (removing it from the
// guarded source gives the source back, and no output holds it).
func FuzzTemplate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(dataDir, "templates", "*.jinja"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b), "Hello")
		}
	}
	f.Add("{% if true %}{{ a }}\n{% endif %}", "x")
	f.Add("{%- for m in messages -%}{{- m.content -}}{%- endfor %}", "{{ '%}' }}")
	f.Fuzz(func(t *testing.T, src, content string) {
		if g := guardTags(src); strings.ReplaceAll(g, guard, "") != src && !strings.Contains(src, guard) {
			t.Fatalf("guarding changed the source:\n%q\n%q", src, g)
		}
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		out, err := tmpl.Render(Input{Messages: []Message{{Role: "user", Content: Text(content)}, {Role: "assistant", Content: Parts(Part{Type: "text", Text: content})}},
			AddGenerationPrompt: true})
		if err == nil && strings.Contains(out, guard) {
			t.Fatalf("the output holds the guard: %q", out)
		}
	})
}
