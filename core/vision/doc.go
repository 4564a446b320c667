// Package vision is the CPU reference of tessera's image path: the
// vision_config of a kimi_k3 checkpoint, the MoonViT-style vision tower,
// the mm_projector, and early fusion of the projected image tokens into
// the LM's input embeddings (architecture.md §6).
//
// Pipeline for one image (imageio does the first two steps):
//
//	decode → smart resize to multiples of patch·merge → normalise
//	→ patches [N, 3·p·p] in merge-window order
//	→ patch embed (Linear) [+ bilinear-resampled absolute table]
//	→ L × pre-norm ViT block (non-causal MHA with 2D RoPE, MLP with GELU-tanh)
//	→ final norm → 2×2 merge (consecutive rows) → projector → [N/4, d_text]
//
// The result replaces, in order, the N/4 copies of media_placeholder_token_id
// in the prompt (Fuse); the LM needs no multimodal positions (NoPE).
//
// # Position information
//
// pos_emb_type "divided_fixed" (K3, MoonViT) adds a learnable absolute table
// [init_pos_emb_height, init_pos_emb_width, D], bilinearly resampled to the
// patch grid (align_corners = false), and applies 2D RoPE in every block.
// "rope_2d" (tessera extension) uses 2D RoPE only; tessera's tiny presets use
// it (no table, no interpolation kernel, any grid size). 2D RoPE follows
// MoonViT: complex pairs (x_{2k}, x_{2k+1}) of each head; pair 2i rotates by
// col·θ^(−4i/hd), pair 2i+1 by row·θ^(−4i/hd), θ = rope_theta (10000).
//
// # vision_config fields
//
//	field                       default              meaning
//	patch_size                  14                   p
//	vt_hidden_size              required             D
//	vt_num_hidden_layers        required             L
//	vt_num_attention_heads      required             H
//	qkv_hidden_size             vt_hidden_size       H·hd (hd % 4 == 0)
//	vt_intermediate_size        required             MLP width
//	merge_kernel_size           [2, 2]               int or [mh, mw]
//	merge_type                  "sd2_tpool"          only value
//	mlp_type                    "mlp2"               only value
//	norm_type                   "rmsnorm"            or "layernorm"
//	vt_norm_eps (tessera)       2⁻²³ rms / 1e-5 ln   block and final norm eps
//	activation_func             "gelu_pytorch_tanh"  or "gelu"
//	attn_bias                   false                wqkv/wo biases
//	linear_bias                 false                fc0/fc1 and proj.0/proj.2 biases
//	patch_embed_proj_bias       false                patch embedding bias
//	pos_emb_type                "divided_fixed"      or "rope_2d"
//	pos_emb_interpolation_mode  "bilinear"           only value
//	init_pos_emb_height/width   64                   absolute table grid
//	init_pos_emb_time           (ignored)            video only
//	rope_theta (tessera)        10000
//	mm_projector_type           "patchmergerv2"      or "patchmerger"
//	mm_hidden_size              vt_hidden_size       must equal it
//	text_hidden_size            text hidden_size     must equal it
//	projector_hidden_act        "gelu"               or "gelu_pytorch_tanh"
//	projector_ln_eps            1e-5                 projector norm eps
//	image_mean / image_std      [0.5]·3 / [0.5]·3    (tessera) normalisation
//	min_pixels / max_pixels     56·56 / 28·28·1280   (tessera) smart-resize bounds
//	resample                    "bicubic"            (tessera) or "bilinear"
//
// # Tensor names
//
// Names follow the K3 checkpoint (MoonViT3d + PatchMergerMLPV2) as read
// from public ports; shapes in PyTorch [out, in] order:
//
//	vision_tower.patch_embed.proj.weight             [D, 3, p, p]
//	vision_tower.patch_embed.proj.bias               [D]           patch_embed_proj_bias
//	vision_tower.patch_embed.pos_emb.weight          [h0, w0, D]   divided_fixed
//	vision_tower.encoder.blocks.{i}.norm0.weight     [D]           (+ .bias for layernorm)
//	vision_tower.encoder.blocks.{i}.wqkv.weight      [3·H·hd, D]   (+ .bias: attn_bias)
//	vision_tower.encoder.blocks.{i}.wo.weight        [D, H·hd]     (+ .bias: attn_bias)
//	vision_tower.encoder.blocks.{i}.norm1.weight     [D]           (+ .bias for layernorm)
//	vision_tower.encoder.blocks.{i}.mlp.fc0.weight   [I, D]        (+ .bias: linear_bias)
//	vision_tower.encoder.blocks.{i}.mlp.fc1.weight   [D, I]        (+ .bias: linear_bias)
//	vision_tower.encoder.final_layernorm.weight      [D]           (+ .bias for layernorm)
//	mm_projector.pre_norm.weight, .bias              [D]           patchmerger (LayerNorm)
//	mm_projector.proj.0.weight                       [4D, 4D]      (+ .bias: linear_bias)
//	mm_projector.proj.2.weight                       [d_text, 4D]  (+ .bias: linear_bias)
//	mm_projector.post_norm.weight                    [d_text]      patchmergerv2 (RMSNorm)
//
// wqkv's output is [q | k | v], each [H, hd]. The merge concatenates the
// mh·mw patches of a window in row-major order (the sd2_tpool order for one
// frame), so 4D = mh·mw·D.
package vision
