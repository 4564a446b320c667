package chat

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dataDir holds the published templates, the conversations and the
// goldens python3-jinja2 rendered from them (scripts/chat/goldens.py).
var dataDir = filepath.Join("..", "..", "testdata", "chat")

type goldenSpec struct {
	Templates map[string]struct {
		File string  `json:"file"`
		BOS  *string `json:"bos_token"`
		EOS  *string `json:"eos_token"`
	} `json:"templates"`
	Now   string `json:"now"`
	Cases []struct {
		Name                string            `json:"name"`
		Skip                map[string]string `json:"skip"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		Vars                map[string]any    `json:"vars"`
		Tools               []json.RawMessage `json:"tools"`
		Messages            []Message         `json:"messages"`
	} `json:"cases"`
}

type goldenFile struct {
	Jinja2  string `json:"jinja2"`
	Results []struct {
		Template string  `json:"template"`
		Case     string  `json:"case"`
		Output   *string `json:"output"`
		Raised   string  `json:"raised"`
	} `json:"results"`
}

// readGoldens loads the spec and the goldens; missing goldens fail under
// CI=true and skip (saying how to make them) otherwise.
func readGoldens(t *testing.T) (*goldenSpec, *goldenFile) {
	t.Helper()
	var spec goldenSpec
	b, err := os.ReadFile(filepath.Join(dataDir, "conversations.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &spec))
	gb, err := os.ReadFile(filepath.Join(dataDir, "goldens.json"))
	if os.IsNotExist(err) {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but testdata/chat/goldens.json is missing: make it with make chat-goldens (python3-jinja2)")
		}
		t.Skip("testdata/chat/goldens.json is missing: make it with make chat-goldens (python3-jinja2)")
	}
	require.NoError(t, err)
	var g goldenFile
	require.NoError(t, json.Unmarshal(gb, &g))
	return &spec, &g
}

// goldenTemplate parses a template of the spec with its special tokens and
// the fixed clock of the goldens.
func goldenTemplate(t *testing.T, spec *goldenSpec, name string) *Template {
	t.Helper()
	ts, ok := spec.Templates[name]
	require.True(t, ok, "template %s", name)
	src, err := os.ReadFile(filepath.Join(dataDir, "templates", ts.File))
	require.NoError(t, err)
	tmpl, err := Parse(string(src))
	require.NoError(t, err, ts.File)
	for k, v := range map[string]*string{"bos_token": ts.BOS, "eos_token": ts.EOS} {
		if v != nil {
			tmpl.Tokens[k] = *v
		}
	}
	now, err := time.Parse("2006-01-02T15:04:05", spec.Now)
	require.NoError(t, err)
	tmpl.Now = func() time.Time { return now }
	return tmpl
}

// TestGoldens renders every published template of testdata/chat over every
// conversation it takes and compares with python3-jinja2's rendering byte
// for byte; where jinja2 stopped in raise_exception, Render must fail with
// the same message.
func TestGoldens(t *testing.T) {
	spec, g := readGoldens(t)
	inputs := map[string]Input{}
	skips := map[string]map[string]string{}
	for _, c := range spec.Cases {
		inputs[c.Name] = Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Vars: c.Vars}
		skips[c.Name] = c.Skip
	}
	tmpls := map[string]*Template{}
	seen := map[string]bool{}
	for _, r := range g.Results {
		t.Run(r.Template+"/"+r.Case, func(t *testing.T) {
			tmpl := tmpls[r.Template]
			if tmpl == nil {
				tmpl = goldenTemplate(t, spec, r.Template)
				tmpls[r.Template] = tmpl
			}
			in, ok := inputs[r.Case]
			require.True(t, ok, "goldens.json has case %s, conversations.json does not: regenerate", r.Case)
			seen[r.Template+"/"+r.Case] = true
			got, err := tmpl.Render(in)
			if r.Output == nil {
				require.Error(t, err, "jinja2 raised %q", r.Raised)
				require.Contains(t, err.Error(), r.Raised)
				return
			}
			require.NoError(t, err)
			if got != *r.Output {
				i := 0
				for i < len(got) && i < len(*r.Output) && got[i] == (*r.Output)[i] {
					i++
				}
				lo := max(0, i-80)
				t.Fatalf("differs from jinja2 at byte %d:\njinja2:  %q\ntessera: %q", i, (*r.Output)[lo:min(len(*r.Output), i+80)], got[lo:min(len(got), i+80)])
			}
		})
	}
	// Every template × case not skipped has a golden: a stale goldens.json
	// cannot hide a case.
	for name := range spec.Templates {
		for _, c := range spec.Cases {
			if _, skip := c.Skip[name]; !skip && !seen[name+"/"+c.Name] {
				t.Errorf("no golden for %s/%s: run make chat-goldens", name, c.Name)
			}
		}
	}
}

// TestTextOnlyTemplateJoinsParts: for templates written for string content
// (Qwen3, DeepSeek V3.1), the Renderer joins text parts, so a conversation
// sent as parts renders exactly as jinja2 renders the same text as strings.
func TestTextOnlyTemplateJoinsParts(t *testing.T) {
	spec, g := readGoldens(t)
	var parts Input
	for _, c := range spec.Cases {
		if c.Name == "text-parts" {
			parts = Input{Messages: c.Messages, AddGenerationPrompt: c.AddGenerationPrompt}
		}
	}
	require.NotEmpty(t, parts.Messages)
	for _, name := range []string{"qwen3", "deepseek-v3.1"} {
		tmpl := goldenTemplate(t, spec, name)
		r, err := FromSource(tmpl.Source(), tmpl.Tokens)
		require.NoError(t, err)
		require.True(t, r.textOnly, "%s should be detected as string-content only", name)
		got, err := r.Render(parts)
		require.NoError(t, err)
		var want *string
		for _, res := range g.Results {
			if res.Template == name && res.Case == "text-parts-joined" {
				want = res.Output
			}
		}
		require.NotNil(t, want, "golden %s/text-parts-joined", name)
		require.Equal(t, *want, got, name)
		// Images cannot be placed by such a template.
		_, err = r.Render(Input{Messages: []Message{{Role: "user", Content: Parts(Part{Type: "image"}, Part{Type: "text", Text: "x"})}}})
		require.ErrorContains(t, err, "renders text content only")
	}
	// The Kimi templates iterate over parts themselves.
	for _, name := range []string{"kimi-k2", "kimi-k2-thinking", "kimi-k3"} {
		tmpl := goldenTemplate(t, spec, name)
		r, err := FromSource(tmpl.Source(), tmpl.Tokens)
		require.NoError(t, err)
		require.False(t, r.textOnly, name)
	}
}

// TestGoldensUpToDate runs scripts/chat/goldens.py into a temporary file
// and requires it to equal the committed goldens (a template or case
// changed without regenerating them fails here). It needs python3 with
// jinja2: under CI=true its absence fails, else the test skips.
func TestGoldensUpToDate(t *testing.T) {
	py := jinjaPython()
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no python3 can import jinja2: install it with scripts/setup.sh jinja")
		}
		t.Skip("python3 with jinja2 not available (scripts/setup.sh jinja)")
	}
	out := filepath.Join(t.TempDir(), "goldens.json")
	cmd := exec.Command(py, filepath.Join("..", "..", "scripts", "chat", "goldens.py"), out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	var fresh, committed goldenFile
	for path, g := range map[string]*goldenFile{out: &fresh, filepath.Join(dataDir, "goldens.json"): &committed} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, g))
	}
	// The jinja2 version may differ (another 3.1.x); the renderings may not.
	if !reflect.DeepEqual(fresh.Results, committed.Results) {
		t.Fatalf("testdata/chat/goldens.json is stale (jinja2 %s now, %s then): run make chat-goldens and commit it", fresh.Jinja2, committed.Jinja2)
	}
}

// jinjaPython is a python3 that can import jinja2: Debian's
// /usr/bin/python3 (scripts/setup.sh jinja installs python3-jinja2 for it)
// first, else the one on PATH; "" if none.
func jinjaPython() string {
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, py := range cands {
		if exec.Command(py, "-c", "import jinja2").Run() == nil {
			return py
		}
	}
	return ""
}

// TestBuiltinMatchesKimiK2: the built-in Kimi format equals jinja2's
// rendering of the published Kimi-K2 template for every golden
// conversation it can render the same: one that opens with a system
// message (the two differ only in the default system prompt they insert),
// without tools, tool calls or images.
func TestBuiltinMatchesKimiK2(t *testing.T) {
	spec, g := readGoldens(t)
	want := map[string]string{}
	for _, r := range g.Results {
		if r.Template == "kimi-k2" && r.Output != nil {
			want[r.Case] = *r.Output
		}
	}
	n := 0
	for _, c := range spec.Cases {
		if len(c.Messages) == 0 || c.Messages[0].Role != "system" || len(c.Tools) > 0 || len(Images(c.Messages)) > 0 {
			continue
		}
		if slices.ContainsFunc(c.Messages, func(m Message) bool { return len(m.ToolCalls) > 0 }) {
			continue
		}
		w, ok := want[c.Name]
		require.True(t, ok, c.Name)
		got, err := Builtin().Render(Input{Messages: c.Messages, AddGenerationPrompt: c.AddGenerationPrompt})
		require.NoError(t, err, c.Name)
		require.Equal(t, w, got, c.Name)
		n++
	}
	require.GreaterOrEqual(t, n, 5, "cases compared")
}
