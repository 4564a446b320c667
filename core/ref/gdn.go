package ref

import "math"

// GDNGate computes the Gated DeltaNet (Qwen3-Next) log-decays of T tokens
// from the per-value-head projections a ([T, H]):
//
//	g[t,h] = −exp(A_log[h]) · softplus(a[t,h] + dt_bias[h])      ∈ (−∞, 0)
//
// and writes each head's scalar decay broadcast over its dk key channels
// (g is [T, H·dk]): a scalar-per-head decay is the per-channel decay of Kimi
// Delta Attention with all channels equal, so the GDN recurrence runs on
// KDARecurrent / KDAChunked unchanged (architecture.md §1.2–1.3, §1.6).
// A_log and dt_bias hold H values.
func GDNGate(g, a, dtBias, aLog []float32, T, H, dk int) {
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			v := float32(-math.Exp(float64(aLog[h]))) * Softplus(a[t*H+h]+dtBias[h])
			row := g[(t*H+h)*dk : (t*H+h+1)*dk]
			for i := range row {
				row[i] = v
			}
		}
	}
}

// RepeatHeads expands T rows of H heads of width d ([T, H·d]) to H·r heads
// ([T, H·r·d]) by repeating each head r times in place order (head h·r+j is
// head h; torch repeat_interleave over the head axis): the GQA-style sharing
// of Gated DeltaNet query/key heads by r = Hv/Hk value heads.
// dst must not alias src.
func RepeatHeads(dst, src []float32, T, H, r, d int) {
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			s := src[(t*H+h)*d : (t*H+h+1)*d]
			for j := 0; j < r; j++ {
				copy(dst[((t*H+h)*r+j)*d:], s)
			}
		}
	}
}
