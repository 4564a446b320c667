package tokenizer

import (
	"container/heap"
	"math"
	"sync"
	"unicode/utf8"
)

// bpeModel is the byte-pair-encoding model shared by the tokenizer.json and
// tiktoken loaders. Symbols are token ids; a word starts as one symbol per
// byte (byte-level models, tiktoken) or per character (character-level
// models with optional byte fallback) and adjacent symbols are merged,
// lowest rank first and leftmost among equal ranks, until no merge applies.
type bpeModel struct {
	byteLevel bool       // symbols start as bytes; byteID holds their ids
	byteID    [256]int32 // -1 where a byte has no token

	// Hugging Face merges: (left<<32 | right) → rank and merged id.
	merges map[uint64]mergeRule
	// tiktoken: token bytes → rank (= id); a pair merges when its
	// concatenation is a token.
	ranks map[string]int32

	tokBytes [][]byte // id → the token's bytes as the model sees them

	ignoreMerges bool             // emit a whole word at once when it is a token
	wordVocab    map[string]int32 // word (bytes, or text for char-level) → id

	byteFallback bool
	fallbackID   [256]int32 // id of "<0xXX>" for byte fallback
	unkID        int32      // -1 when there is no unknown token
	fuseUnk      bool

	mu    sync.Mutex
	cache map[string][]int32
}

type mergeRule struct{ rank, id int32 }

const maxCacheEntries = 1 << 16

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// pair reports whether symbols a and b merge, with the merge's rank and the
// merged symbol.
func (m *bpeModel) pair(a, b int32, scratch *[]byte) (rank, id int32, ok bool) {
	if m.ranks != nil {
		buf := append(append((*scratch)[:0], m.tokBytes[a]...), m.tokBytes[b]...)
		*scratch = buf
		r, found := m.ranks[string(buf)]
		return r, r, found
	}
	r, found := m.merges[pairKey(a, b)]
	return r.rank, r.id, found
}

// encodeWord appends the ids of one pre-tokenised word to out.
func (m *bpeModel) encodeWord(word string, out []int) []int {
	if word == "" {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.wordVocab[word]; ok {
			return append(out, int(id))
		}
	}
	m.mu.Lock()
	cached, ok := m.cache[word]
	m.mu.Unlock()
	if ok {
		for _, id := range cached {
			out = append(out, int(id))
		}
		return out
	}
	syms := m.initialSymbols(word)
	syms = m.merge(syms)
	m.mu.Lock()
	if len(m.cache) >= maxCacheEntries {
		m.cache = make(map[string][]int32, 1024)
	}
	m.cache[word] = syms
	m.mu.Unlock()
	for _, id := range syms {
		out = append(out, int(id))
	}
	return out
}

// initialSymbols splits a word into its starting symbols.
func (m *bpeModel) initialSymbols(word string) []int32 {
	syms := make([]int32, 0, len(word))
	if m.byteLevel {
		for i := 0; i < len(word); i++ {
			if id := m.byteID[word[i]]; id >= 0 {
				syms = append(syms, id)
			} else {
				syms = m.appendUnk(syms)
			}
		}
		return syms
	}
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:]) // n is 1 for an invalid byte
		ch := word[i : i+n]
		i += n
		if id, ok := m.wordVocab[ch]; ok {
			syms = append(syms, id)
			continue
		}
		if m.byteFallback {
			all := true
			for j := 0; j < len(ch); j++ {
				if m.fallbackID[ch[j]] < 0 {
					all = false
				}
			}
			if all {
				for j := 0; j < len(ch); j++ {
					syms = append(syms, m.fallbackID[ch[j]])
				}
				continue
			}
		}
		syms = m.appendUnk(syms)
	}
	return syms
}

func (m *bpeModel) appendUnk(syms []int32) []int32 {
	if m.unkID < 0 {
		return syms // like Hugging Face: dropped when there is no unknown token
	}
	if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1] == m.unkID {
		return syms
	}
	return append(syms, m.unkID)
}

// smallWord is the length up to which the quadratic scan beats the heap.
const smallWord = 48

func (m *bpeModel) merge(syms []int32) []int32 {
	if len(syms) > smallWord {
		return m.mergeHeap(syms)
	}
	var scratch []byte
	for len(syms) > 1 {
		best, bestRank, bestID := -1, int32(math.MaxInt32), int32(0)
		for i := 0; i+1 < len(syms); i++ {
			if r, id, ok := m.pair(syms[i], syms[i+1], &scratch); ok && r < bestRank {
				best, bestRank, bestID = i, r, id
			}
		}
		if best < 0 {
			break
		}
		syms[best] = bestID
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	return syms
}

type mergeCand struct {
	rank, pos   int32
	left, right int32 // the ids the candidate was computed for
	id          int32
}

type candHeap []mergeCand

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(mergeCand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeHeap is merge for long words: a linked list of symbols and a heap of
// candidate merges ordered by (rank, position), O(n log n).
func (m *bpeModel) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	if n < 2 {
		return syms
	}
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range syms {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	var scratch []byte
	h := candHeap{}
	push := func(i int32) {
		j := next[i]
		if i < 0 || j < 0 {
			return
		}
		if r, id, ok := m.pair(syms[i], syms[j], &scratch); ok {
			h = append(h, mergeCand{rank: r, pos: i, left: syms[i], right: syms[j], id: id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := heap.Pop(&h).(mergeCand)
		i := c.pos
		j := next[i]
		if !alive[i] || j < 0 || syms[i] != c.left || syms[j] != c.right {
			continue // stale
		}
		syms[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if p := prev[i]; p >= 0 {
			if r, id, ok := m.pair(syms[p], syms[i], &scratch); ok {
				heap.Push(&h, mergeCand{rank: r, pos: p, left: syms[p], right: syms[i], id: id})
			}
		}
		if k := next[i]; k >= 0 {
			if r, id, ok := m.pair(syms[i], syms[k], &scratch); ok {
				heap.Push(&h, mergeCand{rank: r, pos: i, left: syms[i], right: syms[k], id: id})
			}
		}
	}
	out := syms[:0:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}
