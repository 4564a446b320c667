package config

// parseQwen3Next reads a Hugging Face Qwen3-Next config.json (model_type
// "qwen3_next", transformers Qwen3NextConfig; architecture.md §1.1, §2.5,
// §3.4, §5): Gated DeltaNet layers ("linear_attention") and gated GQA
// layers ("full_attention") from layer_types or, without it, every
// full_attention_interval-th layer; a softmax top-k MoE with a gated shared
// expert on layers (i+1) % decoder_sparse_step == 0 outside mlp_only_layers,
// a dense SwiGLU MLP elsewhere.
func (c *Config) parseQwen3Next(m map[string]any) error {
	c.Layout = LayoutQwen3Next
	r := reader{m: m}
	c.parseCommon(&r)
	if c.MaxPositions == 0 {
		c.MaxPositions = 262144
	}
	c.NumKVHeads = r.posInt("num_key_value_heads")
	c.HeadDim = r.intOr("head_dim", 0)
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	c.parseRope(&r, 10000)
	prf := r.floatOr("partial_rotary_factor", 1)
	if rp := r.object("rope_parameters"); rp.m != nil {
		prf = rp.floatOr("partial_rotary_factor", prf)
	}
	c.RotaryDim = int(float64(c.HeadDim) * prf)
	if r.boolOr("use_sliding_window", false) {
		r.fail("use_sliding_window", "true is not supported")
	}

	c.LinearKeyHeads = r.posInt("linear_num_key_heads")
	c.LinearValueHeads = r.posInt("linear_num_value_heads")
	c.LinearKeyHeadDim = r.posInt("linear_key_head_dim")
	c.LinearValueHeadDim = r.posInt("linear_value_head_dim")
	c.ConvKernel = r.intOr("linear_conv_kernel_dim", 4)

	c.IntermediateSize = r.intOr("intermediate_size", 0)
	c.NumExperts = r.intOr("num_experts", 0)
	c.TopK = r.intOr("num_experts_per_tok", 0)
	c.MoEIntermediateSize = r.intOr("moe_intermediate_size", 0)
	c.SharedExpertIntermediateSize = r.intOr("shared_expert_intermediate_size", 0)
	c.Renormalize = r.boolOr("norm_topk_prob", true)
	c.RenormalizeAnyK = true
	c.SoftmaxRouter = true
	c.RoutedScalingFactor = 1
	c.NumExpertGroup, c.TopKGroup, c.MoELayerFreq = 1, 1, 1
	c.DecoderSparseStep = r.intOr("decoder_sparse_step", 1)
	c.MLPOnlyLayers = r.intList("mlp_only_layers")

	L := c.NumHiddenLayers
	var types []string
	if v, ok := r.get("layer_types"); ok {
		list, isList := v.([]any)
		if !isList {
			r.fail("layer_types", "want a list of strings, got %T", v)
		}
		for _, e := range list {
			s, _ := e.(string)
			types = append(types, s)
		}
	}
	interval := r.intOr("full_attention_interval", 4)
	if r.err != nil {
		return r.err
	}
	if err := c.checkLimits(""); err != nil {
		return err
	}
	c.Kinds = make([]LayerKind, L)
	if types != nil && len(types) != L {
		return fieldErr("layer_types", "%d entries for %d layers", len(types), L)
	}
	if types == nil && interval < 1 {
		return fieldErr("full_attention_interval", "must be ≥ 1, got %d", interval)
	}
	for i := range c.Kinds {
		full := (i+1)%max(interval, 1) == 0
		if types != nil {
			switch types[i] {
			case "linear_attention":
				full = false
			case "full_attention":
				full = true
			default:
				return fieldErr("layer_types", "entry %d is %q (want linear_attention or full_attention)", i, types[i])
			}
		}
		c.Kinds[i] = GDN
		if full {
			c.Kinds[i] = GQA
		}
	}
	switch {
	case c.LinearValueHeads%c.LinearKeyHeads != 0:
		return fieldErr("linear_num_value_heads", "%d is not a multiple of linear_num_key_heads %d", c.LinearValueHeads, c.LinearKeyHeads)
	case c.NumHeads%c.NumKVHeads != 0:
		return fieldErr("num_attention_heads", "%d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	case c.HeadDim < 1:
		return fieldErr("head_dim", "must be positive, got %d", c.HeadDim)
	case c.ConvKernel < 1:
		return fieldErr("linear_conv_kernel_dim", "must be ≥ 1, got %d", c.ConvKernel)
	case c.DecoderSparseStep < 1:
		return fieldErr("decoder_sparse_step", "must be ≥ 1, got %d", c.DecoderSparseStep)
	case c.SharedExpertIntermediateSize < 0:
		return fieldErr("shared_expert_intermediate_size", "must not be negative")
	}
	if err := c.ropeCheck("partial_rotary_factor", c.HeadDim); err != nil {
		return err
	}
	return c.validateShared("")
}
