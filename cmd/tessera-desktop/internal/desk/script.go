package desk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/core/generate"
)

// script is the input of scripted mode (--script FILE): what to type and
// which image to open. Sampling fields default as `tessera run`'s flags do.
// Relative paths are resolved against the script file's directory.
type Script struct {
	Prompt            string   `json:"prompt"`
	Image             string   `json:"image,omitempty"`
	MaxTokens         *int     `json:"max_tokens,omitempty"`
	Temperature       float64  `json:"temperature,omitempty"`
	TopK              int      `json:"top_k,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	MinP              float64  `json:"min_p,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	Seed              *uint64  `json:"seed,omitempty"`
	// Screenshot is where the PNG goes (the --screenshot flag wins).
	Screenshot string `json:"screenshot,omitempty"`
}

// LoadScript reads and checks a script file.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--script: %w", err)
	}
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("--script %s: %w", path, err)
	}
	if s.Prompt == "" {
		return nil, fmt.Errorf("--script %s: \"prompt\" is missing or empty", path)
	}
	if s.MaxTokens != nil && *s.MaxTokens < 0 {
		return nil, fmt.Errorf("--script %s: \"max_tokens\" is %d, want ≥ 0", path, *s.MaxTokens)
	}
	base := filepath.Dir(path)
	for _, p := range []*string{&s.Image, &s.Screenshot} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	if _, err := s.Settings(Settings{}); err != nil {
		return nil, fmt.Errorf("--script %s: %w", path, err)
	}
	return &s, nil
}

// settings applies the script's sampling fields on top of def (the
// command-line settings); fields the script leaves out keep def's values,
// except the plain numbers, which default to tessera run's defaults.
func (s *Script) Settings(def Settings) (Settings, error) {
	out := def
	out.Sampler.Temperature = float32(s.Temperature)
	out.Sampler.TopK = s.TopK
	out.Sampler.MinP = float32(s.MinP)
	if s.TopP != nil {
		out.Sampler.TopP = float32(*s.TopP)
	}
	if s.RepetitionPenalty != nil {
		out.Sampler.RepetitionPenalty = float32(*s.RepetitionPenalty)
	}
	if s.Seed != nil {
		out.Sampler.Seed = *s.Seed
	}
	if s.MaxTokens != nil {
		out.MaxTokens = *s.MaxTokens
	}
	if out.Sampler.TopP == 0 {
		out.Sampler.TopP = 1
	}
	if out.Sampler.RepetitionPenalty == 0 {
		out.Sampler.RepetitionPenalty = 1
	}
	if err := out.Sampler.Validate(); err != nil {
		return out, err
	}
	return out, nil
}

// DefaultSettings are `tessera run`'s flag defaults.
func DefaultSettings() Settings {
	return Settings{Sampler: generate.SamplerOptions{TopP: 1, RepetitionPenalty: 1, Seed: 1}, MaxTokens: 64}
}

// ErrScriptTimeout reports a scripted run that did not finish in time.
var ErrScriptTimeout = errors.New("scripted run timed out")
