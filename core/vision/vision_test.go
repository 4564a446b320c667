package vision

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestOpsHandCases(t *testing.T) {
	out := make([]float32, 4)
	ref.LayerNorm(out, []float32{1, 2, 3, 4}, []float32{1, 1, 1, 1}, []float32{0, 0, 0, 0}, 0)
	for i, w := range []float64{-1.3416408, -0.4472136, 0.4472136, 1.3416408} {
		if !near(float64(out[i]), w, 1e-6) {
			t.Errorf("LayerNorm[%d] = %v, want %v", i, out[i], w)
		}
	}
	ref.LayerNorm(out, []float32{1, 2, 3, 4}, []float32{2, 2, 2, 2}, []float32{1, 1, 1, 1}, 0)
	if !near(float64(out[0]), 1-2*1.3416408, 1e-5) {
		t.Errorf("LayerNorm with affine: %v", out[0])
	}
	for _, c := range []struct {
		f    func(float32) float32
		x, y float64
	}{
		{ref.GELUTanh, 0, 0}, {ref.GELUTanh, 1, 0.8411920}, {ref.GELUTanh, -1, -0.1588080}, {ref.GELUTanh, 3, 2.9963627},
		{ref.GELUErf, 0, 0}, {ref.GELUErf, 1, 0.8413447}, {ref.GELUErf, -1, -0.1586553},
	} {
		if got := c.f(float32(c.x)); !near(float64(got), c.y, 1e-6) {
			t.Errorf("GELU(%v) = %v, want %v", c.x, got, c.y)
		}
	}
	// Attention: N=2, H=1, hd=1; q=k=[1,0], v=[1,3].
	att := make([]float32, 2)
	ref.ImageAttention(nil, att, []float32{1, 0}, []float32{1, 0}, []float32{1, 3}, 2, 1, 1)
	e := math.E
	if !near(float64(att[0]), (e+3)/(e+1), 1e-6) || !near(float64(att[1]), 2, 1e-6) {
		t.Errorf("attention = %v, want [%v 2]", att, (e+3)/(e+1))
	}
	// Same with a pool and two heads (second head a copy): identical.
	p := ref.NewPool(3)
	defer p.Close()
	att2 := make([]float32, 4)
	ref.ImageAttention(p, att2, []float32{1, 1, 0, 0}, []float32{1, 1, 0, 0}, []float32{1, 1, 3, 3}, 2, 2, 1)
	if att2[0] != att[0] || att2[1] != att[0] || att2[2] != att[1] {
		t.Errorf("pooled attention %v vs %v", att2, att)
	}
	// 2D RoPE, hd = 4: ω_0 = 1; pair 0 by col, pair 1 by row.
	cos, sin := RoPE2DTable([]int{2}, []int{1}, 4, 10000)
	x := []float32{1, 0, 1, 0}
	ref.ApplyRoPE(x, 1, 1, 4, cos, sin)
	for i, w := range []float64{math.Cos(1), math.Sin(1), math.Cos(2), math.Sin(2)} {
		if !near(float64(x[i]), w, 1e-6) {
			t.Errorf("RoPE[%d] = %v, want %v", i, x[i], w)
		}
	}
	// hd = 8: pairs 2, 3 use ω_1 = 10000^(-1/2) = 0.01.
	cos, _ = RoPE2DTable([]int{100}, []int{50}, 8, 10000)
	if !near(float64(cos[2]), math.Cos(0.5), 1e-6) || !near(float64(cos[3]), math.Cos(1), 1e-6) {
		t.Errorf("RoPE ω_1: cos = %v", cos)
	}
	// Bilinear position table 2×2 → 4×4 (align_corners = false).
	pe := InterpPosEmb([]float32{0, 1, 2, 3}, 2, 2, 1, 4, 4)
	want := []float32{0, .25, .75, 1, .5, .75, 1.25, 1.5, 1.5, 1.75, 2.25, 2.5, 2, 2.25, 2.75, 3}
	for i := range want {
		if !near(float64(pe[i]), float64(want[i]), 1e-6) {
			t.Fatalf("InterpPosEmb = %v, want %v", pe, want)
		}
	}
}

const k3Published = `{"activation_func":"gelu_pytorch_tanh","attn_bias":false,"init_pos_emb_height":64,
"init_pos_emb_time":4,"init_pos_emb_width":64,"linear_bias":false,"merge_kernel_size":[2,2],
"merge_type":"sd2_tpool","mlp_type":"mlp2","mm_hidden_size":1024,"mm_projector_type":"patchmergerv2",
"norm_type":"rmsnorm","patch_embed_proj_bias":false,"patch_size":14,"pos_emb_interpolation_mode":"bilinear",
"pos_emb_type":"divided_fixed","projector_hidden_act":"gelu","projector_ln_eps":1e-05,"qkv_hidden_size":1536,
"text_hidden_size":7168,"vt_hidden_size":1024,"vt_intermediate_size":4096,"vt_num_attention_heads":12,
"vt_num_hidden_layers":27}`

const tinyJSON = `{"patch_size":14,"vt_hidden_size":32,"vt_num_hidden_layers":2,"vt_num_attention_heads":2,
"vt_intermediate_size":64,"merge_kernel_size":[2,2],"norm_type":"layernorm","pos_emb_type":"rope_2d",
"mm_projector_type":"patchmerger","projector_hidden_act":"gelu_pytorch_tanh","attn_bias":true,"linear_bias":true,
"patch_embed_proj_bias":true,"min_pixels":3136,"max_pixels":50176}`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(k3Published), 7168)
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim() != 128 || c.MergedDim() != 4096 || !c.RMSNorm || c.PosEmb != PosDividedFixed || c.Projector != ProjPatchMergerV2 || c.ProjAct != ActGELUErf {
		t.Errorf("K3 config parsed as %+v", c)
	}
	n, err := c.TokensPerImage(448, 448)
	if err != nil || n != 256 {
		t.Errorf("TokensPerImage(448, 448) = %d, %v; want 256", n, err)
	}
	whole := `{"model_type":"kimi_k3","text_config":{"hidden_size":7168},"vision_config":` + k3Published + `}`
	if c2, err := ParseModelConfig([]byte(whole)); err != nil || c2.TextHidden != 7168 {
		t.Errorf("ParseModelConfig: %v", err)
	}
	if c3, err := ParseModelConfig([]byte(`{"model_type":"kimi_k3","text_config":{}}`)); c3 != nil || err != nil {
		t.Errorf("no vision_config: %v %v", c3, err)
	}
	for _, b := range []struct{ patch, field string }{
		{`"vt_hidden_size":1024`, "vt_hidden_size"},        // removed → missing
		{`"qkv_hidden_size":1536`, "qkv_hidden_size"},      // → 1537
		{`"norm_type":"rmsnorm"`, "norm_type"},             // → "batchnorm"
		{`"pos_emb_type":"divided_fixed"`, "pos_emb_type"}, // → "learned"
		{`"text_hidden_size":7168`, "text_hidden_size"},    // → 512
		{`"merge_kernel_size":[2,2]`, "merge_kernel_size"}, // → [2]
		{`"mm_projector_type":"patchmergerv2"`, "mm_projector_type"},
		{`"vt_num_attention_heads":12`, "vt_num_attention_heads"}, // → 0
	} {
		repl := map[string]string{
			"vt_hidden_size": `"x":1`, "qkv_hidden_size": `"qkv_hidden_size":1537`, "norm_type": `"norm_type":"batchnorm"`,
			"pos_emb_type": `"pos_emb_type":"learned"`, "text_hidden_size": `"text_hidden_size":512`,
			"merge_kernel_size": `"merge_kernel_size":[2]`, "mm_projector_type": `"mm_projector_type":"mlp"`,
			"vt_num_attention_heads": `"vt_num_attention_heads":0`,
		}[b.field]
		_, err := ParseConfig([]byte(strings.Replace(k3Published, b.patch, repl, 1)), 7168)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != b.field {
			t.Errorf("%s: err = %v, want a FieldError naming it", b.field, err)
		}
	}
}

// tower builds a random tower for cfgJSON through a safetensors round trip.
func tower(t *testing.T, cfgJSON string, textHidden int, seed uint64) *Tower {
	t.Helper()
	c, err := ParseConfig([]byte(cfgJSON), textHidden)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := safetensors.Write(&b, RandomTensors(c, seed, safetensors.BF16), nil); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{safetensors.SingleFileName: b.Bytes()}))
	if err != nil {
		t.Fatal(err)
	}
	tw, err := Load(c, ck)
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

func patches(t *testing.T, c *Config, file string) *imageio.Patches {
	t.Helper()
	data, err := os.ReadFile("../../testdata/images/" + file)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := imageio.Decode(data, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := imageio.Preprocess(img, c.Preprocess())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEndToEnd(t *testing.T) {
	k3tiny := strings.NewReplacer(`"vt_hidden_size":1024`, `"vt_hidden_size":32`, `"mm_hidden_size":1024`, `"mm_hidden_size":32`,
		`"qkv_hidden_size":1536`, `"qkv_hidden_size":48`, `"vt_intermediate_size":4096`, `"vt_intermediate_size":64`,
		`"vt_num_attention_heads":12`, `"vt_num_attention_heads":3`, `"vt_num_hidden_layers":27`, `"vt_num_hidden_layers":2`,
		`"init_pos_emb_height":64`, `"init_pos_emb_height":8`, `"init_pos_emb_width":64`, `"init_pos_emb_width":8`,
		`"text_hidden_size":7168`, `"text_hidden_size":48`).Replace(k3Published)
	pool := ref.NewPool(4)
	defer pool.Close()
	for _, c := range []struct{ name, cfg string }{{"tiny-rope2d-layernorm-patchmerger", tinyJSON}, {"k3-shaped", k3tiny}} {
		t.Run(c.name, func(t *testing.T) {
			const d = 48
			tw := tower(t, c.cfg, d, 7)
			var imgs [][]float32
			for _, f := range []string{"quadrants-exif6.jpg", "alpha.png", "blue-purple-pink.lossy.webp"} {
				px := patches(t, tw.Cfg, f)
				out, err := tw.Encode(nil, px)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != px.Merged()*d {
					t.Fatalf("%s: %d values, want %d×%d", f, len(out), px.Merged(), d)
				}
				var ss float64
				for _, v := range out {
					if v != v || math.IsInf(float64(v), 0) {
						t.Fatalf("%s: non-finite output", f)
					}
					ss += float64(v) * float64(v)
				}
				rms := math.Sqrt(ss / float64(len(out)))
				if rms < 0.05 || rms > 20 {
					t.Errorf("%s: output rms %v is not O(1)", f, rms)
				}
				again, _ := tower(t, c.cfg, d, 7).Encode(pool, px)
				for i := range out {
					if !near(float64(out[i]), float64(again[i]), 1e-5*(1+math.Abs(float64(out[i])))) {
						t.Fatalf("%s: not deterministic at %d: %v vs %v", f, i, out[i], again[i])
					}
				}
				n, _ := tw.Cfg.TokensPerImage(px.GridH*14, px.GridW*14)
				if n != px.Merged() {
					t.Errorf("%s: TokensPerImage %d, patches merged %d", f, n, px.Merged())
				}
				imgs = append(imgs, out)
			}
			// Early fusion of 3 images into a prompt.
			const V, ph = 16, 15
			emb := make([]float32, V*d)
			for i := range emb {
				emb[i] = float32(i%97) / 97
			}
			E := tensor.NewF32(V, d, emb)
			counts := []int{len(imgs[0]) / d, len(imgs[1]) / d, len(imgs[2]) / d}
			ids, err := ExpandPlaceholders([]int{1, 2, ph, 3, ph, ph, 4}, ph, counts)
			if err != nil {
				t.Fatal(err)
			}
			fused, err := Fuse(ids, ph, E, imgs)
			if err != nil {
				t.Fatal(err)
			}
			if len(fused) != len(ids)*d {
				t.Fatalf("fused %d values for %d tokens", len(fused), len(ids))
			}
			row := func(i int) []float32 { return fused[i*d : (i+1)*d] }
			if row(0)[0] != emb[1*d] || row(2)[0] != imgs[0][0] || row(2 + counts[0])[0] != emb[3*d] ||
				row(3 + counts[0])[5] != imgs[1][5] || row(3 + counts[0] + counts[1])[0] != imgs[2][0] ||
				row(len(ids) - 1)[0] != emb[4*d] {
				t.Error("fused rows are not in order")
			}
			if _, err := Fuse(ids[:len(ids)-2], ph, E, imgs); err == nil || !strings.Contains(err.Error(), "expected") {
				t.Errorf("count mismatch: err = %v", err)
			}
		})
	}
}

func TestFuseAndExpandErrors(t *testing.T) {
	E := tensor.NewF32(4, 2, make([]float32, 8))
	for _, c := range []struct {
		name   string
		ids    []int
		images [][]float32
		msg    string
	}{
		{"too few placeholders", []int{0, 3, 1}, [][]float32{{1, 2, 3, 4}}, "expected 2 placeholder tokens (id 3) for 1 image(s), found 1"},
		{"too many", []int{3, 3, 3}, [][]float32{{1, 2, 3, 4}}, "found 3"},
		{"bad width", []int{3}, [][]float32{{1, 2, 3}}, "not a positive multiple"},
		{"bad id", []int{9, 3}, [][]float32{{1, 2}}, "outside the vocabulary"},
	} {
		if _, err := Fuse(c.ids, 3, E, c.images); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.msg)
		}
	}
	if _, err := ExpandPlaceholders([]int{1, 7, 2}, 7, []int{3, 4}); err == nil || !strings.Contains(err.Error(), "2 images but 1 placeholder") {
		t.Errorf("expand: %v", err)
	}
}

// TestLoadErrors: Load refuses a missing, mis-shaped, badly typed or
// unused vision tensor, naming it; Check gives the same error (and none
// for a good checkpoint) from the header alone, reading no tensor data.
func TestLoadErrors(t *testing.T) {
	c, _ := ParseConfig([]byte(tinyJSON), 48)
	ts := RandomTensors(c, 1, safetensors.F32)
	open := func(t *testing.T, ts []safetensors.WriteTensor) (*safetensors.Checkpoint, *safetensors.Recorder) {
		ck, rec, err := safetensors.RecordTensors(ts)
		if err != nil {
			t.Fatal(err)
		}
		return ck, rec
	}
	replace := func(i int, w safetensors.WriteTensor) []safetensors.WriteTensor {
		out := append([]safetensors.WriteTensor(nil), ts...)
		out[i] = w
		return out
	}
	extra := append(append([]safetensors.WriteTensor(nil), ts...), safetensors.WriteTensor{Name: "vision_tower.extra", DType: safetensors.F32, Shape: []int{1}, Data: []float32{0}})
	half := ts[0]
	half.DType = safetensors.BF16
	byteT := ts[1]
	byteT.DType, byteT.Data = safetensors.U8, make([]float32, len(byteT.Data))
	for _, tc := range []struct {
		name string
		ts   []safetensors.WriteTensor
		want string // "": loads
	}{
		{"good", ts, ""},
		{"half precision", replace(0, half), ""},
		{"missing", ts[1:], ts[0].Name + ": missing"},
		{"unused", extra, "vision tensors the vision_config does not use: vision_tower.extra"},
		{"mis-shaped", replace(0, safetensors.WriteTensor{Name: ts[0].Name, DType: safetensors.F32, Shape: []int{1}, Data: []float32{0}}), ts[0].Name + ": expected shape"},
		{"bad dtype", replace(1, byteT), ts[1].Name + ": dtype U8 is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ck, _ := open(t, tc.ts)
			tw, err := Load(c, ck)
			ck2, rec := open(t, tc.ts)
			cerr := Check(c, ck2)
			for _, n := range ck2.Names() {
				tt, _ := ck2.Tensor(n)
				if r := rec.Overlaps(tt); len(r) > 0 {
					t.Errorf("Check read %s: %v", n, r)
				}
			}
			if tc.want == "" {
				if err != nil || cerr != nil || tw == nil || tw.PatchW == nil {
					t.Fatalf("Load: %v, Check: %v", err, cerr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want %q", err, tc.want)
			}
			if cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("Check: %v, Load: %v", cerr, err)
			}
		})
	}
}
