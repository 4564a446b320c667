package engine

import (
	"container/list"
	"slices"
	"sync"

	"github.com/tessera-llm/tessera/core/model"
)

// PrefixCache keeps snapshots of sequence states keyed by the tokens that
// led to them, least recently used first out when the snapshots exceed a
// byte budget. A generation whose prompt starts with a cached key resumes
// from that snapshot and prefills only the rest. Keys are token ids, with
// each image's tokens replaced by a hash of its pixels (two prompts with
// different images never share a snapshot past the first one). Safe for
// concurrent use.
type PrefixCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *cacheEntry, most recent first
	stats  CacheStats
}

type cacheEntry struct {
	key  []int
	snap *model.Snapshot
	hist []int // the ids the state has seen (key with the images' placeholder ids)
}

// CacheStats count what the prefix cache saved.
type CacheStats struct {
	Lookups     int64 `json:"lookups"`
	Hits        int64 `json:"hits"`
	SavedTokens int64 `json:"savedTokens"` // prompt tokens not prefilled thanks to a hit
	Entries     int   `json:"entries"`
	Bytes       int64 `json:"bytes"`
	Budget      int64 `json:"budget"`
}

// NewPrefixCache returns a cache holding at most budget bytes of snapshots.
func NewPrefixCache(budget int64) *PrefixCache {
	return &PrefixCache{budget: budget, lru: list.New()}
}

// Lookup returns the snapshot of the longest cached key that is a prefix
// of key and at most maxLen long (nil when none), with the ids it has seen.
func (c *PrefixCache) Lookup(key []int, maxLen int) (*model.Snapshot, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Lookups++
	var best *list.Element
	bestLen := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		en := el.Value.(*cacheEntry)
		n := len(en.key)
		if n > bestLen && n <= maxLen && n <= len(key) && slices.Equal(en.key, key[:n]) {
			best, bestLen = el, n
		}
	}
	if best == nil {
		return nil, nil
	}
	c.lru.MoveToFront(best)
	c.stats.Hits++
	c.stats.SavedTokens += int64(bestLen)
	en := best.Value.(*cacheEntry)
	return en.snap, en.hist
}

// peek is Lookup without counting, for saving: the longest cached prefix
// of key (any length) with its own key.
func (c *PrefixCache) peek(key []int) (*model.Snapshot, []int, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *cacheEntry
	for el := c.lru.Front(); el != nil; el = el.Next() {
		en := el.Value.(*cacheEntry)
		n := len(en.key)
		if (best == nil || n > len(best.key)) && n <= len(key) && slices.Equal(en.key, key[:n]) {
			best = en
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	return best.snap, best.hist, best.key
}

// Put stores a snapshot taken after hist (key: its cache key). Snapshots
// larger than the whole budget are not kept; older entries go until the
// new one fits. A key already cached is refreshed.
func (c *PrefixCache) Put(key, hist []int, snap *model.Snapshot) {
	size := snap.Bytes() + 8*int64(len(key)+len(hist))
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget || len(key) == 0 {
		return
	}
	for el := c.lru.Front(); el != nil; el = el.Next() {
		if slices.Equal(el.Value.(*cacheEntry).key, key) {
			c.lru.MoveToFront(el)
			return
		}
	}
	for c.used+size > c.budget && c.lru.Len() > 0 {
		el := c.lru.Back()
		en := el.Value.(*cacheEntry)
		c.used -= en.snap.Bytes() + 8*int64(len(en.key)+len(en.hist))
		c.lru.Remove(el)
	}
	c.lru.PushFront(&cacheEntry{key: slices.Clone(key), hist: slices.Clone(hist), snap: snap})
	c.used += size
}

// Stats reports the cache's counters.
func (c *PrefixCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.Budget = c.lru.Len(), c.used, c.budget
	return s
}
