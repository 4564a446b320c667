package vision

import (
	"strings"
	"testing"
)

// FuzzParseConfig checks that ParseConfig never panics on arbitrary
// vision_config text and that an accepted config passes Validate, has
// positive derived sizes and can plan the tokens of a few image sizes
// without panicking.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(k3Published), 7168)
	f.Add([]byte(tinyJSON), 48)
	f.Add([]byte(tinyJSON), 0)
	f.Add([]byte(`{}`), 0)
	f.Add([]byte(`null`), 0)
	f.Add([]byte(`[]`), 0)
	f.Add([]byte(strings.Replace(tinyJSON, `"merge_kernel_size":[2,2]`, `"merge_kernel_size":3`, 1)), 48)
	f.Add([]byte(strings.Replace(tinyJSON, `"patch_size":14`, `"patch_size":2147483647`, 1)), 48)
	f.Add([]byte(strings.Replace(tinyJSON, `"max_pixels":50176`, `"max_pixels":2147483647,"image_std":[1e-30,1,1e38]`, 1)), 48)
	f.Add([]byte(`{"patch_size":1,"vt_hidden_size":2147483647,"vt_num_hidden_layers":1,"vt_num_attention_heads":1,"vt_intermediate_size":1,"qkv_hidden_size":4,"merge_kernel_size":[65535,65535],"text_hidden_size":1,"max_pixels":2147483647}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, textHidden int) {
		c, err := ParseConfig(data, textHidden)
		if err != nil {
			if c != nil {
				t.Fatal("ParseConfig returned both a config and an error")
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		if c.HeadDim() <= 0 || c.MergedDim() <= 0 {
			t.Fatalf("accepted config has head dim %d, merged dim %d", c.HeadDim(), c.MergedDim())
		}
		if textHidden > 0 && c.TextHidden != textHidden {
			t.Fatalf("text_hidden_size %d accepted against %d", c.TextHidden, textHidden)
		}
		for _, hw := range [][2]int{{1, 1}, {224, 224}, {448, 300}, {1, 200}, {10000, 60}} {
			n, err := c.TokensPerImage(hw[0], hw[1])
			if err == nil && n <= 0 {
				t.Fatalf("TokensPerImage(%d, %d) = %d with no error", hw[0], hw[1], n)
			}
		}
	})
}
