package config

import (
	"fmt"
	"time"

	"github.com/dlclark/regexp2"
	"sort"
	"strings"
)

// Weight formats of quantization_config (compressed-tensors' "format").
const (
	formatInt   = "int-quantized"
	formatMXFP4 = "mxfp4-pack-quantized"
)

// parseQuant accepts the two compressed-tensors weight schemes tessera
// runs ("quant_method": "compressed-tensors", weights only, no activation
// quantization):
//
//   - int-quantized (Quant "q8"): every config group's weights
//     {"num_bits": 8, "type": "int", "symmetric": true, "strategy":
//     "channel"}; tensors NAME.weight I8 + NAME.weight_scale [out, 1].
//   - mxfp4-pack-quantized (Quant "mxfp4"; the format at the top level or
//     in the config group, as Kimi K3 ships it): weights {"num_bits": 4,
//     "type": "float", "group_size": 32} (strategy "group", symmetric,
//     uint8 scales where given); tensors NAME.weight_packed U8 [out, in/2]
//     and NAME.weight_scale U8 [out, in/32], kept as MXFP4
//     (tensor.MXFP4FromPacked).
//
// The groups' "targets" and the "ignore" list say which modules are
// quantized (QuantTargets). Anything else is refused by field.
func (c *Config) parseQuant(field string, v any) error {
	q, ok := v.(map[string]any)
	if !ok {
		return fieldErr(field, "want an object")
	}
	if m, _ := q["quant_method"].(string); m != "compressed-tensors" {
		return fieldErr(field+".quant_method", "%v is not supported (tessera runs compressed-tensors int8 per-channel or MXFP4 weights; convert other checkpoints to F32/F16/BF16)", q["quant_method"])
	}
	groups, ok := q["config_groups"].(map[string]any)
	if !ok || len(groups) == 0 {
		return fieldErr(field+".config_groups", "missing")
	}
	top, _ := q["format"].(string)
	scheme := ""
	var targets []modulePattern
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		gf := fmt.Sprintf("%s.config_groups.%s", field, name)
		gm, _ := groups[name].(map[string]any)
		if gm == nil {
			return fieldErr(gf, "want an object")
		}
		w, _ := gm["weights"].(map[string]any)
		if w == nil {
			return fieldErr(gf+".weights", "missing")
		}
		if a, ok := gm["input_activations"]; ok && a != nil {
			return fieldErr(gf+".input_activations", "activation quantization is not supported")
		}
		format := top
		if f, ok := gm["format"].(string); ok {
			format = f
		}
		s, err := weightScheme(gf+".weights", format, w)
		if err != nil {
			return err
		}
		if scheme != "" && s != scheme {
			return fieldErr(gf, "mixes %s with %s weights; one scheme per checkpoint is supported", s, scheme)
		}
		scheme = s
		ts, err := patterns(gf+".targets", gm["targets"])
		if err != nil {
			return err
		}
		targets = append(targets, ts...)
	}
	ignore, err := patterns(field+".ignore", q["ignore"])
	if err != nil {
		return err
	}
	c.Quant, c.QuantConfig, c.quantTargets, c.quantIgnore = scheme, q, targets, ignore
	return nil
}

// SetQuant sets c's quantization_config to q (checked as Parse checks
// it, field names under "quantization_config").
func (c *Config) SetQuant(q map[string]any) error {
	return c.parseQuant("quantization_config", q)
}

// weightScheme checks one config group's weights object against format
// and returns the Quant it means.
func weightScheme(field, format string, w map[string]any) (string, error) {
	num := func(k string) string { return fmt.Sprint(w[k]) } // json.Number, or an int of MXFP4Config
	str := func(k string) string { s, _ := w[k].(string); return s }
	switch format {
	case "", formatInt, "naive-quantized":
		if num("num_bits") != "8" || str("type") != "int" || w["symmetric"] != true || str("strategy") != "channel" {
			return "", fieldErr(field, "only {num_bits: 8, type: int, symmetric: true, strategy: channel} is supported for %s weights, got %v", formatInt, w)
		}
		return "q8", nil
	case formatMXFP4:
		if num("num_bits") != "4" || str("type") != "float" || num("group_size") != "32" {
			return "", fieldErr(field, "%s needs {num_bits: 4, type: float, group_size: 32}, got %v", formatMXFP4, w)
		}
		if s := str("strategy"); s != "" && s != "group" {
			return "", fieldErr(field+".strategy", "%q: %s scales are per group of 32 (strategy group)", s, formatMXFP4)
		}
		if s, ok := w["symmetric"]; ok && s != true {
			return "", fieldErr(field+".symmetric", "MXFP4 weights are symmetric, got %v", s)
		}
		if d := str("scale_dtype"); d != "" && d != "torch.uint8" && d != "uint8" && d != "torch.float8_e8m0fnu" {
			return "", fieldErr(field+".scale_dtype", "%q: MXFP4 scales are E8M0 exponents (uint8)", d)
		}
		if w["dynamic"] == true {
			return "", fieldErr(field+".dynamic", "dynamic weight quantization is not supported")
		}
		return "mxfp4", nil
	}
	return "", fieldErr(field, "format %q is not supported (want %s or %s)", format, formatInt, formatMXFP4)
}

// modulePattern is a compressed-tensors target or ignore entry: "re:" and
// a regular expression matched at the start of a module name (Python's
// re.match, which compressed-tensors uses: regexp2's default syntax, the
// one the tokenizer's patterns use too), or a name matched whole; "Linear"
// (a class) matches every linear layer.
type modulePattern struct {
	name string
	re   *regexp2.Regexp
}

func (p modulePattern) match(module string) bool {
	if p.re != nil {
		ok, err := p.re.MatchString(module)
		return ok && err == nil // err: the pattern ran past its time limit
	}
	return p.name == "Linear" || p.name == module || strings.HasSuffix(module, "."+p.name)
}

// patterns parses a list of module patterns (absent: none).
func patterns(field string, v any) ([]modulePattern, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if ss, isStrings := v.([]string); isStrings {
		list, ok = make([]any, len(ss)), true
		for i, s := range ss {
			list[i] = s
		}
	}
	if !ok {
		return nil, fieldErr(field, "want a list of module names and \"re:\" patterns, got %v", v)
	}
	var out []modulePattern
	for i, e := range list {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fieldErr(fmt.Sprintf("%s[%d]", field, i), "want a module name or \"re:\" pattern, got %v", e)
		}
		p := modulePattern{name: s}
		if r, ok := strings.CutPrefix(s, "re:"); ok {
			re, err := regexp2.Compile(`\A(?:`+r+")", regexp2.None)
			if err != nil {
				return nil, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%v", err)
			}
			re.MatchTimeout = time.Second // a backtracking pattern cannot hang the load
			p.re = re
		}
		out = append(out, p)
	}
	return out, nil
}

// QuantTargets reports whether quantization_config quantizes the linear
// module of that name (a checkpoint tensor name without ".weight"): a
// config group targets it and the ignore list does not name it. False
// for an unquantized config.
func (c *Config) QuantTargets(module string) bool {
	if c.Quant == "" {
		return false
	}
	hit := false
	for _, p := range c.quantTargets {
		hit = hit || p.match(module)
	}
	for _, p := range c.quantIgnore {
		hit = hit && !p.match(module)
	}
	return hit
}

// Q8Config is the quantization_config tessera writes for int8 per-channel
// weights (lm_head, embeddings, routers and the vision tower stay float).
func Q8Config() map[string]any {
	return map[string]any{
		"quant_method": "compressed-tensors",
		"format":       formatInt,
		"config_groups": map[string]any{"group_0": map[string]any{
			"targets": []string{"Linear"},
			"weights": map[string]any{"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"},
		}},
		"ignore": []string{"lm_head", "re:.*embed_tokens", "re:.*block_sparse_moe.gate$", "re:vision_tower.*", "re:mm_projector.*"},
	}
}

// MXFP4ExpertPattern matches the modules MXFP4Config quantizes: the routed
// experts' w1, w2 and w3 (what Kimi K3 ships as MXFP4; everything else
// stays in its float type).
const MXFP4ExpertPattern = `.*block_sparse_moe\.experts\.\d+\.w[123]$`

// MXFP4Config is the quantization_config tessera writes for MXFP4 routed
// experts, in the form Kimi K3's checkpoint has it.
func MXFP4Config() map[string]any {
	return map[string]any{
		"quant_method":        "compressed-tensors",
		"format":              formatMXFP4,
		"quantization_status": "compressed",
		"config_groups": map[string]any{"group_0": map[string]any{
			"format":  formatMXFP4,
			"targets": []string{"re:" + MXFP4ExpertPattern},
			"weights": map[string]any{"num_bits": 4, "type": "float", "symmetric": true, "group_size": 32,
				"strategy": "group", "dynamic": false, "observer": "minmax", "scale_dtype": "torch.uint8"},
			"input_activations": nil,
		}},
		"ignore": []string{"lm_head", "re:vision_tower.*", "re:mm_projector.*"},
	}
}
