package tokenizer

// The byte-level BPE used by GPT-2 and its descendants (Qwen, DeepSeek,
// Llama 3) writes every byte as one printable Unicode character so that the
// vocabulary file is valid text: the printable Latin-1 bytes stand for
// themselves and the other 68 bytes are moved, in increasing order, to
// U+0100 and up.

var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode maps a byte-level token string back to raw bytes. ok is
// false when a character is outside the byte alphabet; callers then use the
// token's own UTF-8 bytes, as the Hugging Face ByteLevel decoder does.
func byteLevelDecode(s string) (out []byte, ok bool) {
	out = make([]byte, 0, len(s))
	for _, r := range s {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
