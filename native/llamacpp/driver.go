//go:build cgo && linux && amd64

package llamacpp

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The by-value structs of llama.h at commit 0ad4a86, field for field (the
// names are ours). Offsets are asserted below; Go never touches them.
typedef struct {
	void *devices;
	const void *tensor_buft_overrides;
	int32_t n_gpu_layers;
	int32_t split_mode;
	int32_t load_mode;   // enum llama_load_mode: -1 auto, 0 none, 1 mmap
	int32_t lazy_mode;
	int32_t main_gpu;
	const float *tensor_split;
	void *progress_callback;
	void *progress_callback_user_data;
	const void *kv_overrides;
	bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
} tl_model_params;

typedef struct {
	uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq;
	int32_t n_threads, n_threads_batch;
	int32_t ctx_type, rope_scaling_type, pooling_type, attention_type, flash_attn_type;
	float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
	uint32_t yarn_orig_ctx;
	float defrag_thold;
	void *cb_eval, *cb_eval_user_data;
	int32_t type_k, type_v;  // enum ggml_type: 0 F32, 1 F16
	void *abort_callback, *abort_callback_data;
	bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
	void *samplers;
	size_t n_samplers;
	void *ctx_other;
} tl_context_params;

typedef struct {
	int32_t nthread, ftype, output_tensor_type, token_embedding_type;
	bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
	const void *imatrix, *kv_overrides, *tt_overrides;
	const int32_t *prune_layers;
	size_t max_buf_size;
} tl_quantize_params;

typedef struct {
	int32_t n_tokens;
	int32_t *token;
	float *embd;
	int32_t *pos;
	int32_t *n_seq_id;
	int32_t **seq_id;
	int8_t *logits;
} tl_batch;

// Layout pins: the offsets read off llama.h and off the stores in the
// shipped library's *_default_params functions.
_Static_assert(sizeof(tl_model_params) == 0x50, "llama_model_params size");
_Static_assert(offsetof(tl_model_params, n_gpu_layers) == 0x10, "n_gpu_layers");
_Static_assert(offsetof(tl_model_params, load_mode) == 0x18, "load_mode");
_Static_assert(offsetof(tl_model_params, main_gpu) == 0x20, "main_gpu");
_Static_assert(offsetof(tl_model_params, kv_overrides) == 0x40, "kv_overrides");
_Static_assert(offsetof(tl_model_params, vocab_only) == 0x48, "model bools");
_Static_assert(sizeof(tl_context_params) == 0xa0, "llama_context_params size");
_Static_assert(offsetof(tl_context_params, n_threads) == 0x1c, "n_threads");
_Static_assert(offsetof(tl_context_params, flash_attn_type) == 0x34, "flash_attn_type");
_Static_assert(offsetof(tl_context_params, rope_freq_base) == 0x38, "rope_freq_base");
_Static_assert(offsetof(tl_context_params, defrag_thold) == 0x54, "defrag_thold");
_Static_assert(offsetof(tl_context_params, type_k) == 0x68, "type_k");
_Static_assert(offsetof(tl_context_params, embeddings) == 0x80, "context bools");
_Static_assert(offsetof(tl_context_params, samplers) == 0x88, "samplers");
_Static_assert(offsetof(tl_context_params, ctx_other) == 0x98, "ctx_other");
_Static_assert(sizeof(tl_quantize_params) == 0x40, "llama_model_quantize_params size");
_Static_assert(offsetof(tl_quantize_params, allow_requantize) == 0x10, "quantize bools");
_Static_assert(offsetof(tl_quantize_params, imatrix) == 0x18, "imatrix");
_Static_assert(offsetof(tl_quantize_params, max_buf_size) == 0x38, "max_buf_size");
_Static_assert(sizeof(tl_batch) == 0x38, "llama_batch size");

static struct {
	void (*load_all_from_path)(const char *);
	size_t (*dev_count)(void);
	void *(*dev_get)(size_t);
	const char *(*dev_description)(void *);
	void (*backend_init)(void);
	void (*log_set)(void (*)(int, const char *, void *), void *);
	tl_model_params (*model_default_params)(void);
	tl_context_params (*context_default_params)(void);
	tl_quantize_params (*quantize_default_params)(void);
	void *(*model_load_from_file)(const char *, tl_model_params);
	void (*model_free)(void *);
	void *(*init_from_model)(void *, tl_context_params);
	void (*free)(void *);
	const void *(*model_get_vocab)(const void *);
	int32_t (*vocab_n_tokens)(const void *);
	int32_t (*model_desc)(const void *, char *, size_t);
	uint64_t (*model_n_params)(const void *);
	uint32_t (*n_ctx)(const void *);
	uint32_t (*n_batch)(const void *);
	uint32_t (*n_ubatch)(const void *);
	int32_t (*decode)(void *, tl_batch);
	float *(*get_logits_ith)(void *, int32_t);
	void *(*get_memory)(const void *);
	void (*memory_clear)(void *, bool);
	uint32_t (*model_quantize)(const char *, const char *, const tl_quantize_params *);
	const char *(*print_system_info)(void);
	const char *(*commit)(void);
	const void *(*get_type_traits)(int32_t);
	size_t (*quantize_chunk)(int32_t, const float *, void *, int64_t, int64_t, int64_t, const float *);
} tl;

// struct ggml_type_traits of ggml.h at that commit (the fields read here).
typedef struct {
	const char *type_name;
	int64_t blck_size;
	int64_t blck_size_interleave;
	size_t type_size;
	bool is_quantized;
	void (*to_float)(const void *, float *, int64_t);
	void (*from_float_ref)(const float *, void *, int64_t);
} tl_type_traits;

static int tl_verbose;
static int tl_last_level;

// Log callback: errors always reach stderr, everything with
// TESSERA_LLAMACPP_LOG set. Level 5 continues the previous line.
static void tl_log(int level, const char *text, void *ud) {
	(void)ud;
	if (level != 5) tl_last_level = level;
	if (tl_verbose || tl_last_level >= 4) fputs(text, stderr);
}

#define TL_SYM(h, field, name) do { \
	*(void **)(&tl.field) = dlsym(h, name); \
	if (!tl.field) { snprintf(err, errlen, "%s: %s", name, dlerror()); return -1; } \
} while (0)

// tl_open loads the three libraries (libllama pulls in libggml and
// libggml-base through its $ORIGIN runpath) and resolves every symbol.
static int tl_open(const char *llama, const char *ggml, const char *common, int verbose, char *err, size_t errlen) {
	void *hg = dlopen(ggml, RTLD_NOW | RTLD_GLOBAL);
	if (!hg) { snprintf(err, errlen, "%s", dlerror()); return -1; }
	void *hl = dlopen(llama, RTLD_NOW | RTLD_GLOBAL);
	if (!hl) { snprintf(err, errlen, "%s", dlerror()); return -1; }
	void *hc = dlopen(common, RTLD_NOW | RTLD_LOCAL);
	if (!hc) { snprintf(err, errlen, "%s", dlerror()); return -1; }
	TL_SYM(hg, load_all_from_path, "ggml_backend_load_all_from_path");
	TL_SYM(hg, dev_count, "ggml_backend_dev_count");
	TL_SYM(hg, dev_get, "ggml_backend_dev_get");
	TL_SYM(hg, dev_description, "ggml_backend_dev_description");
	TL_SYM(hl, backend_init, "llama_backend_init");
	TL_SYM(hl, log_set, "llama_log_set");
	TL_SYM(hl, model_default_params, "llama_model_default_params");
	TL_SYM(hl, context_default_params, "llama_context_default_params");
	TL_SYM(hl, quantize_default_params, "llama_model_quantize_default_params");
	TL_SYM(hl, model_load_from_file, "llama_model_load_from_file");
	TL_SYM(hl, model_free, "llama_model_free");
	TL_SYM(hl, init_from_model, "llama_init_from_model");
	TL_SYM(hl, free, "llama_free");
	TL_SYM(hl, model_get_vocab, "llama_model_get_vocab");
	TL_SYM(hl, vocab_n_tokens, "llama_vocab_n_tokens");
	TL_SYM(hl, model_desc, "llama_model_desc");
	TL_SYM(hl, model_n_params, "llama_model_n_params");
	TL_SYM(hl, n_ctx, "llama_n_ctx");
	TL_SYM(hl, n_batch, "llama_n_batch");
	TL_SYM(hl, n_ubatch, "llama_n_ubatch");
	TL_SYM(hl, decode, "llama_decode");
	TL_SYM(hl, get_logits_ith, "llama_get_logits_ith");
	TL_SYM(hl, get_memory, "llama_get_memory");
	TL_SYM(hl, memory_clear, "llama_memory_clear");
	TL_SYM(hl, model_quantize, "llama_model_quantize");
	TL_SYM(hl, print_system_info, "llama_print_system_info");
	TL_SYM(hc, commit, "_Z12llama_commitv"); // const char *llama_commit() (C++)
	TL_SYM(hg, get_type_traits, "ggml_get_type_traits"); // from libggml-base
	TL_SYM(hg, quantize_chunk, "ggml_quantize_chunk");
	tl_verbose = verbose;
	tl.log_set(tl_log, NULL);
	return 0;
}

static const char *tl_commit(void) { return tl.commit(); }
static const char *tl_system_info(void) { return tl.print_system_info(); }
static size_t tl_load_backends(const char *dir) {
	tl.load_all_from_path(dir);
	tl.backend_init();
	return tl.dev_count();
}

#define TL_WANT(cond, what) do { if (!(cond)) { snprintf(err, errlen, "%s", what); return -1; } } while (0)

// tl_check_defaults compares what the *_default_params functions return
// with llama.cpp's documented defaults at 0ad4a86, field by field across
// each struct: a library whose layout drifted fails here.
static int tl_check_defaults(char *err, size_t errlen) {
	tl_model_params m = tl.model_default_params();
	TL_WANT(m.devices == NULL && m.tensor_buft_overrides == NULL, "model params: devices/overrides not NULL");
	TL_WANT(m.n_gpu_layers == -1 && m.split_mode == 1 && m.load_mode == -1 && m.lazy_mode == 1 && m.main_gpu == 0,
		"model params: n_gpu_layers/split_mode/load_mode/lazy_mode/main_gpu are not -1/1/-1/1/0");
	TL_WANT(m.tensor_split == NULL && m.progress_callback == NULL && m.kv_overrides == NULL, "model params: pointers not NULL");
	TL_WANT(!m.vocab_only && !m.check_tensors && m.use_extra_bufts && !m.no_host && !m.no_alloc && !m.load_mtp,
		"model params: booleans are not 0,0,1,0,0,0");
	tl_context_params c = tl.context_default_params();
	TL_WANT(c.n_ctx == 512 && c.n_batch == 2048 && c.n_ubatch == 512 && c.n_seq_max == 1,
		"context params: n_ctx/n_batch/n_ubatch/n_seq_max are not 512/2048/512/1");
	TL_WANT(c.n_rs_seq == 0 && c.n_outputs_max == 0 && c.n_outputs_max_per_seq == 1 && c.n_threads == 4 && c.n_threads_batch == 4,
		"context params: n_rs_seq/n_outputs_max/n_outputs_max_per_seq/n_threads/n_threads_batch are not 0/0/1/4/4");
	TL_WANT(c.ctx_type == 0 && c.rope_scaling_type == -1 && c.pooling_type == -1 && c.attention_type == -1 && c.flash_attn_type == -1,
		"context params: enums are not 0/-1/-1/-1/-1");
	TL_WANT(c.rope_freq_base == 0 && c.rope_freq_scale == 0 && c.yarn_ext_factor == -1 && c.yarn_attn_factor == -1 &&
		c.yarn_beta_fast == -1 && c.yarn_beta_slow == -1 && c.yarn_orig_ctx == 0 && c.defrag_thold == -1,
		"context params: RoPE/YaRN defaults are not 0,0,-1,-1,-1,-1,0,-1");
	TL_WANT(c.cb_eval == NULL && c.abort_callback == NULL && c.samplers == NULL && c.n_samplers == 0 && c.ctx_other == NULL,
		"context params: callbacks/samplers not NULL");
	TL_WANT(c.type_k == 1 && c.type_v == 1, "context params: type_k/type_v are not F16");
	TL_WANT(!c.embeddings && c.offload_kqv && c.no_perf && c.op_offload && c.swa_full && !c.kv_unified,
		"context params: booleans are not 0,1,1,1,1,0");
	tl_quantize_params q = tl.quantize_default_params();
	TL_WANT(q.nthread == 0 && q.ftype == 7 && q.output_tensor_type == 43 && q.token_embedding_type == 43,
		"quantize params: nthread/ftype/output/embedding types are not 0/Q8_0/COUNT/COUNT");
	TL_WANT(!q.allow_requantize && q.quantize_output_tensor && !q.only_copy && !q.pure && !q.keep_split && !q.dry_run,
		"quantize params: booleans are not 0,1,0,0,0,0");
	TL_WANT(q.imatrix == NULL && q.prune_layers == NULL && q.max_buf_size == ((size_t)8 << 30),
		"quantize params: pointers not NULL or max_buf_size not 8 GiB");
	return 0;
}

static const char *tl_dev_description(size_t i) { return tl.dev_description(tl.dev_get(i)); }

static void *tl_load_model(const char *path, int mmap, int extra_bufts, int gpu_layers) {
	tl_model_params p = tl.model_default_params();
	p.n_gpu_layers = gpu_layers;
	p.load_mode = mmap ? 1 : 0;
	p.use_extra_bufts = extra_bufts != 0;
	return tl.model_load_from_file(path, p);
}

static void tl_model_free(void *m) { tl.model_free(m); }
static int32_t tl_n_vocab(void *m) { return tl.vocab_n_tokens(tl.model_get_vocab(m)); }
static uint64_t tl_n_params(void *m) { return tl.model_n_params(m); }
static int32_t tl_desc(void *m, char *buf, size_t n) { return tl.model_desc(m, buf, n); }

static void *tl_new_context(void *m, uint32_t n_ctx, uint32_t n_batch, uint32_t n_ubatch,
		int32_t threads, int32_t threads_batch, int flash, int f16cache,
		uint32_t *got_ctx, uint32_t *got_batch, uint32_t *got_ubatch) {
	tl_context_params p = tl.context_default_params();
	p.n_ctx = n_ctx;
	p.n_batch = n_batch;
	p.n_ubatch = n_ubatch;
	p.n_seq_max = 1;
	p.n_threads = threads;
	p.n_threads_batch = threads_batch;
	p.flash_attn_type = flash ? 1 : 0;
	p.type_k = p.type_v = f16cache ? 1 : 0;
	p.no_perf = true;
	void *c = tl.init_from_model(m, p);
	if (c) {
		*got_ctx = tl.n_ctx(c);
		*got_batch = tl.n_batch(c);
		*got_ubatch = tl.n_ubatch(c);
	}
	return c;
}

static void tl_free(void *c) { tl.free(c); }
static void tl_clear(void *c) { tl.memory_clear(tl.get_memory(c), true); }

// tl_decode runs one batch of n tokens of sequence 0 at positions
// pos0..pos0+n-1; out[i] != 0 asks for the logits of token i.
static int32_t tl_decode(void *c, int32_t n, int32_t *tokens, int32_t pos0, int8_t *out) {
	int32_t *pos = malloc(sizeof(int32_t) * n);
	int32_t *nseq = malloc(sizeof(int32_t) * n);
	int32_t **seq = malloc(sizeof(int32_t *) * n);
	static int32_t seq0 = 0;
	if (!pos || !nseq || !seq) { free(pos); free(nseq); free(seq); return -100; }
	for (int32_t i = 0; i < n; i++) {
		pos[i] = pos0 + i;
		nseq[i] = 1;
		seq[i] = &seq0;
	}
	tl_batch b = { n, tokens, NULL, pos, nseq, seq, out };
	int32_t rc = tl.decode(c, b);
	free(pos);
	free(nseq);
	free(seq);
	return rc;
}

static float *tl_logits(void *c, int32_t i) { return tl.get_logits_ith(c, i); }

static uint32_t tl_quantize(const char *in, const char *out, int32_t ftype, int32_t nthread) {
	tl_quantize_params p = tl.quantize_default_params();
	p.ftype = ftype;
	p.nthread = nthread;
	return tl.model_quantize(in, out, &p);
}

// tl_traits reports a ggml type's name, block length and block size.
static const char *tl_traits(int32_t type, int64_t *blck, size_t *size, int *has_to_float) {
	const tl_type_traits *t = tl.get_type_traits(type);
	*blck = t->blck_size;
	*size = t->type_size;
	*has_to_float = t->to_float != NULL;
	return t->type_name;
}

// tl_quantize_chunk_go quantizes whole rows from the start, no imatrix.
static size_t tl_quantize_chunk_go(int32_t type, const float *src, void *dst, int64_t rows, int64_t per_row) {
	return tl.quantize_chunk(type, src, dst, 0, rows, per_row, NULL);
}

// tl_to_float runs ggml's to_float of a type over k values.
static void tl_to_float(int32_t type, const void *x, float *y, int64_t k) {
	((const tl_type_traits *)tl.get_type_traits(type))->to_float(x, y, k);
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

// Lib is the loaded llama.cpp library. There is one per process (dlopen
// and ggml's backend registry are process-wide).
type Lib struct {
	// Dir is the directory the libraries were loaded from.
	Dir string
	// Commit is what llama_commit() reports.
	Commit string
	// SystemInfo is llama_print_system_info(): the CPU features the
	// chosen ggml-cpu variant uses.
	SystemInfo string
	// Vulkan is whether this is the Vulkan build (ggml's Vulkan backend
	// loaded beside the CPU's).
	Vulkan bool
	// Devices are ggml's backend devices by description, in registry
	// order (the CPU last; with Vulkan, each visible Vulkan device first).
	Devices []string
}

var (
	openMu  sync.Mutex
	openLib *Lib
)

// Open loads the libraries from dir (DefaultDir() when empty), loads
// ggml's backends from the same directory (ggml_backend_load_all_from_path
// picks the best libggml-cpu-<family>.so for this CPU), and checks the
// library against the layouts this package was written for. Later calls
// return the same Lib; a different dir is an error. Set
// TESSERA_LLAMACPP_LOG=1 to see llama.cpp's log (errors always show).
func Open(dir string) (*Lib, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	openMu.Lock()
	defer openMu.Unlock()
	if openLib != nil {
		if openLib.Dir != abs {
			return nil, fmt.Errorf("llamacpp: already loaded from %s, cannot load %s too", openLib.Dir, abs)
		}
		return openLib, nil
	}
	b, err := findBuild(abs)
	if err != nil {
		return nil, err
	}
	cs := func(s string) *C.char { return C.CString(s) }
	cl, cg, cc, cd := cs(filepath.Join(abs, b.llama)), cs(filepath.Join(abs, b.ggml)), cs(filepath.Join(abs, b.common)), cs(abs)
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cg))
	defer C.free(unsafe.Pointer(cc))
	defer C.free(unsafe.Pointer(cd))
	var ebuf [512]C.char
	verbose := C.int(0)
	if os.Getenv("TESSERA_LLAMACPP_LOG") != "" {
		verbose = 1
	}
	if C.tl_open(cl, cg, cc, verbose, &ebuf[0], C.size_t(len(ebuf))) != 0 {
		return nil, fmt.Errorf("llamacpp: loading %s: %s", abs, C.GoString(&ebuf[0]))
	}
	commit := C.GoString(C.tl_commit())
	if commit != Commit {
		return nil, fmt.Errorf("llamacpp: %s reports llama.cpp commit %q; this package's struct layouts are those of %s (%s)", abs, commit, Commit, Version)
	}
	if C.tl_check_defaults(&ebuf[0], C.size_t(len(ebuf))) != 0 {
		return nil, fmt.Errorf("llamacpp: %s: layout check failed: %s", abs, C.GoString(&ebuf[0]))
	}
	n := C.tl_load_backends(cd)
	if n == 0 {
		return nil, fmt.Errorf("llamacpp: ggml loaded no backend from %s (no usable libggml-cpu-*.so)", abs)
	}
	openLib = &Lib{Dir: abs, Commit: commit, SystemInfo: C.GoString(C.tl_system_info()), Vulkan: b.vulkan}
	for i := C.size_t(0); i < n; i++ {
		openLib.Devices = append(openLib.Devices, C.GoString(C.tl_dev_description(i)))
	}
	return openLib, nil
}

// Model is a GGUF model loaded by llama.cpp.
type Model struct {
	p      unsafe.Pointer
	path   string
	nVocab int
}

// LoadModel loads a GGUF file, p.GPULayers of its layers on ggml's GPU
// backend (Vulkan build only) and the rest on the CPU.
func (l *Lib) LoadModel(path string, p ModelParams) (*Model, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	if p.GPULayers < 0 {
		return nil, fmt.Errorf("llamacpp: GPULayers %d: want ≥ 0", p.GPULayers)
	}
	if p.GPULayers > 0 && !l.Vulkan {
		return nil, fmt.Errorf("llamacpp: %s is the CPU build; offloading layers (GPULayers %d) needs the Vulkan build (scripts/peers/fetch.sh vulkan)", l.Dir, p.GPULayers)
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	mmap := C.int(1)
	if p.NoMmap {
		mmap = 0
	}
	extra := C.int(1)
	if p.NoExtraBuffers {
		extra = 0
	}
	m := C.tl_load_model(cp, mmap, extra, C.int(p.GPULayers))
	if m == nil {
		return nil, fmt.Errorf("llamacpp: llama.cpp could not load %s (its error is on stderr; TESSERA_LLAMACPP_LOG=1 shows the whole log)", path)
	}
	return &Model{p: m, path: path, nVocab: int(C.tl_n_vocab(m))}, nil
}

// NVocab is the vocabulary size (the length of a logits row).
func (m *Model) NVocab() int { return m.nVocab }

// NParams is llama.cpp's parameter count of the model.
func (m *Model) NParams() uint64 { return uint64(C.tl_n_params(m.p)) }

// Desc is llama.cpp's one-line description (architecture, size, type).
func (m *Model) Desc() string {
	var buf [256]C.char
	C.tl_desc(m.p, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// Close frees the model; close its contexts first.
func (m *Model) Close() {
	if m.p != nil {
		C.tl_model_free(m.p)
		m.p = nil
	}
}

// Context is one llama.cpp context (one sequence, its caches and
// recurrent state). It is not safe for concurrent use.
type Context struct {
	p      unsafe.Pointer
	m      *Model
	params ContextParams
	pos    int
	last   int // tokens in the last Decode batch
}

// NewContext creates a context on m. llama.cpp may round n_ctx up; a
// context whose batch sizes differ from those asked for is an error.
func (m *Model) NewContext(p ContextParams) (*Context, error) {
	p = p.withDefaults()
	if p.NUBatch > p.NBatch {
		return nil, fmt.Errorf("llamacpp: n_ubatch %d > n_batch %d", p.NUBatch, p.NBatch)
	}
	b2i := func(b bool) C.int {
		if b {
			return 1
		}
		return 0
	}
	var gotCtx, gotBatch, gotUBatch C.uint32_t
	c := C.tl_new_context(m.p, C.uint32_t(p.NCtx), C.uint32_t(p.NBatch), C.uint32_t(p.NUBatch),
		C.int32_t(p.Threads), C.int32_t(p.ThreadsBatch), b2i(p.FlashAttention), b2i(p.F16Cache),
		&gotCtx, &gotBatch, &gotUBatch)
	if c == nil {
		return nil, fmt.Errorf("llamacpp: llama_init_from_model failed for %s (n_ctx %d, n_batch %d; see stderr)", m.path, p.NCtx, p.NBatch)
	}
	ctx := &Context{p: c, m: m, params: p}
	if int(gotCtx) < p.NCtx || int(gotBatch) != p.NBatch || int(gotUBatch) != p.NUBatch {
		ctx.Close()
		return nil, fmt.Errorf("llamacpp: context has n_ctx %d, n_batch %d, n_ubatch %d; asked for %d, %d, %d",
			gotCtx, gotBatch, gotUBatch, p.NCtx, p.NBatch, p.NUBatch)
	}
	return ctx, nil
}

// Params returns the context's settings (defaults filled in).
func (c *Context) Params() ContextParams { return c.params }

// Pos is the number of tokens in the context.
func (c *Context) Pos() int { return c.pos }

// Decode appends tokens at positions Pos()..Pos()+len(tokens)-1. With
// allLogits the logits of every token are kept (Logits(0..n-1)), else only
// those of the last (Logits(n-1)).
func (c *Context) Decode(tokens []int, allLogits bool) error {
	n := len(tokens)
	if n == 0 {
		return fmt.Errorf("llamacpp: decode: no tokens")
	}
	if n > c.params.NBatch {
		return fmt.Errorf("llamacpp: decode: %d tokens exceed n_batch %d", n, c.params.NBatch)
	}
	if c.pos+n > c.params.NCtx {
		return fmt.Errorf("llamacpp: decode: position %d exceeds n_ctx %d", c.pos+n, c.params.NCtx)
	}
	ids := make([]C.int32_t, n)
	out := make([]C.int8_t, n)
	for i, t := range tokens {
		if t < 0 || t >= c.m.nVocab {
			return fmt.Errorf("llamacpp: decode: token %d (index %d) is outside the vocabulary [0, %d)", t, i, c.m.nVocab)
		}
		ids[i] = C.int32_t(t)
		if allLogits || i == n-1 {
			out[i] = 1
		}
	}
	rc := C.tl_decode(c.p, C.int32_t(n), &ids[0], C.int32_t(c.pos), &out[0])
	if rc != 0 {
		return fmt.Errorf("llamacpp: llama_decode returned %d (%d tokens at position %d)", int(rc), n, c.pos)
	}
	c.pos += n
	c.last = n
	return nil
}

// Logits copies the logits of token i of the last Decode batch into dst
// (grown to NVocab) and returns it.
func (c *Context) Logits(i int, dst []float32) ([]float32, error) {
	if i < 0 || i >= c.last {
		return nil, fmt.Errorf("llamacpp: logits of token %d: the last batch had %d tokens", i, c.last)
	}
	p := C.tl_logits(c.p, C.int32_t(i))
	if p == nil {
		return nil, fmt.Errorf("llamacpp: no logits for token %d of the last batch (decode it with allLogits)", i)
	}
	V := c.m.nVocab
	if cap(dst) < V {
		dst = make([]float32, V)
	}
	dst = dst[:V]
	copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(p)), V))
	return dst, nil
}

// Reset clears the context's caches and state (back to position 0).
func (c *Context) Reset() {
	C.tl_clear(c.p)
	c.pos, c.last = 0, 0
}

// Close frees the context.
func (c *Context) Close() {
	if c.p != nil {
		C.tl_free(c.p)
		c.p = nil
	}
}

// Quantize converts the GGUF file in to out with llama_model_quantize
// (llama.cpp's default rules for which tensors stay in higher precision)
// using threads threads (0: all cores).
func (l *Lib) Quantize(in, out string, ft FType, threads int) error {
	ci, co := C.CString(in), C.CString(out)
	defer C.free(unsafe.Pointer(ci))
	defer C.free(unsafe.Pointer(co))
	if rc := C.tl_quantize(ci, co, C.int32_t(ft), C.int32_t(threads)); rc != 0 {
		return fmt.Errorf("llamacpp: llama_model_quantize %s → %s (ftype %d) returned %d", in, out, ft, int(rc))
	}
	return nil
}

// TypeTraits reports ggml's name, block length and block size of the ggml
// type t (ggml_get_type_traits); ok is false when ggml has no to_float for
// it.
func (l *Lib) TypeTraits(t int) (name string, blockLen, blockBytes int, ok bool) {
	var blck C.int64_t
	var size C.size_t
	var has C.int
	name = C.GoString(C.tl_traits(C.int32_t(t), &blck, &size, &has))
	return name, int(blck), int(size), has != 0
}

// Dequantize expands n values of ggml type t from src with ggml's own
// to_float (the reference dequantizer for block formats).
func (l *Lib) Dequantize(t int, src []byte, n int) ([]float32, error) {
	name, bl, bb, ok := l.TypeTraits(t)
	if !ok || bl <= 0 || n%bl != 0 || len(src) != n/bl*bb {
		return nil, fmt.Errorf("llamacpp: dequantize %d values of %s (block %d, %d bytes) from %d bytes: bad size or no to_float", n, name, bl, bb, len(src))
	}
	out := make([]float32, n)
	if n > 0 {
		C.tl_to_float(C.int32_t(t), unsafe.Pointer(&src[0]), (*C.float)(&out[0]), C.int64_t(n))
	}
	return out, nil
}

// QuantizeRows quantizes rows rows of perRow values to ggml type t with
// ggml_quantize_chunk (no importance matrix: ggml's reference quantizers).
func (l *Lib) QuantizeRows(t int, src []float32, rows, perRow int) ([]byte, error) {
	name, bl, bb, _ := l.TypeTraits(t)
	if bl <= 0 || perRow%bl != 0 || len(src) != rows*perRow || rows == 0 {
		return nil, fmt.Errorf("llamacpp: quantize %d×%d values to %s (block %d): bad size", rows, perRow, name, bl)
	}
	out := make([]byte, rows*perRow/bl*bb)
	n := C.tl_quantize_chunk_go(C.int32_t(t), (*C.float)(&src[0]), unsafe.Pointer(&out[0]), C.int64_t(rows), C.int64_t(perRow))
	if int(n) != len(out) {
		return nil, fmt.Errorf("llamacpp: ggml_quantize_chunk %s wrote %d bytes, want %d", name, int(n), len(out))
	}
	return out, nil
}
