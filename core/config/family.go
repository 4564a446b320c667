package config

import "math"

// parseCommon reads the fields every Hugging Face causal-LM config has and
// refuses the ones tessera cannot honour for the qwen3_next and deepseek_v3
// families: another hidden_act, attention biases, a quantization_config.
func (c *Config) parseCommon(r *reader) {
	c.VocabSize = r.posInt("vocab_size")
	c.HiddenSize = r.posInt("hidden_size")
	c.NumHiddenLayers = r.posInt("num_hidden_layers")
	c.RMSNormEps = float32(r.floatOr("rms_norm_eps", 1e-6))
	c.MaxPositions = r.intOr("max_position_embeddings", 0)
	c.TieWordEmbed = r.boolOr("tie_word_embeddings", false)
	c.BOSTokenID = r.intOr("bos_token_id", -1)
	c.EOSTokenIDs = r.intList("eos_token_id")
	c.NumHeads = r.posInt("num_attention_heads")
	if act := r.stringOr("hidden_act", "silu"); act != "silu" && act != "swish" && r.err == nil {
		r.fail("hidden_act", "%q is not supported (want silu)", act)
	}
	if r.boolOr("attention_bias", false) {
		r.fail("attention_bias", "true is not supported (no bias tensors)")
	}
	if q, ok := r.get("quantization_config"); ok && q != nil {
		r.fail("quantization_config", "quantized %s checkpoints are not supported (convert to F32/F16/BF16)", c.Layout)
	}
}

// parseRope reads rope_theta and a "yarn" rope_scaling (or their
// rope_parameters form of newer transformers). Other scaling types are
// refused by name.
func (c *Config) parseRope(r *reader, defTheta float64) {
	src := r
	rp := r.object("rope_parameters")
	if rp.m != nil {
		src = &rp
	}
	c.RopeTheta = src.floatOr("rope_theta", r.floatOr("rope_theta", defTheta))
	if !(c.RopeTheta > 1) {
		r.fail("rope_theta", "must be > 1, got %g", c.RopeTheta)
	}
	rs := r.object("rope_scaling")
	if rp.m != nil {
		rs = rp
	}
	if rs.m == nil {
		return
	}
	typ := rs.stringOr("rope_type", rs.stringOr("type", "default"))
	switch typ {
	case "default":
		return
	case "yarn":
	default:
		rs.fail("rope_type", "%q is not supported (want default or yarn)", typ)
		if r.err == nil {
			r.err = rs.err
		}
		return
	}
	y := &RopeScaling{
		Factor:               rs.floatOr("factor", 0),
		OriginalMaxPositions: rs.intOr("original_max_position_embeddings", c.MaxPositions),
		BetaFast:             rs.floatOr("beta_fast", 32),
		BetaSlow:             rs.floatOr("beta_slow", 1),
		MScale:               rs.floatOr("mscale", 0),
		MScaleAllDim:         rs.floatOr("mscale_all_dim", 0),
		AttentionFactor:      rs.floatOr("attention_factor", 0),
		Truncate:             rs.boolOr("truncate", true),
	}
	switch {
	case rs.err != nil:
	case !(y.Factor >= 1) || math.IsInf(y.Factor, 0):
		rs.fail("factor", "must be ≥ 1, got %g", y.Factor)
	case y.OriginalMaxPositions < 1:
		rs.fail("original_max_position_embeddings", "must be positive")
	case !(y.BetaFast > 0 && y.BetaSlow > 0):
		rs.fail("beta_fast", "beta_fast and beta_slow must be positive")
	}
	if r.err == nil {
		r.err = rs.err
	}
	c.RopeScaling = y
}

// ropeCheck validates the rotary dimension.
func (c *Config) ropeCheck(field string, headDim int) error {
	if c.RotaryDim < 2 || c.RotaryDim%2 != 0 || c.RotaryDim > headDim {
		return fieldErr(field, "rotary dimension %d must be even and in 2..%d", c.RotaryDim, headDim)
	}
	return nil
}
