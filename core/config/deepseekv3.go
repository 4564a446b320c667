package config

// parseDeepSeekV3 reads a Hugging Face DeepSeek-V3 config.json (model_type
// "deepseek_v3", transformers DeepseekV3Config; architecture.md §2, §3.2,
// §5, §7.2): every layer is MLA with decoupled RoPE (qk_rope_head_dim
// channels, rope_interleave pairs, optional YaRN rope_scaling); the first
// first_k_dense_replace layers have a dense SwiGLU MLP, then every
// moe_layer_freq-th an MoE with the sigmoid noaux_tc router (group-limited
// top-k, e_score_correction_bias for selection only, routed_scaling_factor)
// and n_shared_experts shared experts. The multi-token-prediction layers
// (num_nextn_predict_layers, stored after the last layer) are not run.
func (c *Config) parseDeepSeekV3(m map[string]any) error {
	c.Layout = LayoutDeepSeekV3
	r := reader{m: m}
	c.parseCommon(&r)
	if c.MaxPositions == 0 {
		c.MaxPositions = 4096
	}
	c.QLoraRank = r.intOr("q_lora_rank", 0)
	c.KVLoraRank = r.posInt("kv_lora_rank")
	c.QKNopeHeadDim = r.posInt("qk_nope_head_dim")
	c.QKRopeHeadDim = r.posInt("qk_rope_head_dim")
	c.VHeadDim = r.posInt("v_head_dim")
	c.RopeInterleave = r.boolOr("rope_interleave", true)
	c.parseRope(&r, 10000)
	c.RotaryDim = c.QKRopeHeadDim

	c.IntermediateSize = r.intOr("intermediate_size", 0)
	c.NumExperts = r.intOr("n_routed_experts", 0)
	c.TopK = r.intOr("num_experts_per_tok", 0)
	c.NumSharedExperts = r.intOr("n_shared_experts", 0)
	c.MoEIntermediateSize = r.intOr("moe_intermediate_size", 0)
	c.Renormalize = r.boolOr("norm_topk_prob", true)
	c.RenormalizeAnyK = true
	c.RoutedScalingFactor = float32(r.floatOr("routed_scaling_factor", 1))
	c.NumExpertGroup = r.intOr("n_group", 1)
	c.TopKGroup = r.intOr("topk_group", 1)
	c.FirstKDenseReplace = r.intOr("first_k_dense_replace", 0)
	c.MoELayerFreq = r.intOr("moe_layer_freq", 1)
	if s := r.stringOr("scoring_func", "sigmoid"); s != "sigmoid" {
		r.fail("scoring_func", "%q is not supported (want sigmoid)", s)
	}
	if s := r.stringOr("topk_method", "noaux_tc"); s != "noaux_tc" {
		r.fail("topk_method", "%q is not supported (want noaux_tc)", s)
	}
	if r.err != nil {
		return r.err
	}
	if err := c.checkLimits(""); err != nil {
		return err
	}
	c.Kinds = make([]LayerKind, c.NumHiddenLayers)
	for i := range c.Kinds {
		c.Kinds[i] = MLA
	}
	if c.QLoraRank < 0 {
		return fieldErr("q_lora_rank", "must be positive or null, got %d", c.QLoraRank)
	}
	if err := c.ropeCheck("qk_rope_head_dim", c.QKRopeHeadDim); err != nil {
		return err
	}
	return c.validateShared("")
}
