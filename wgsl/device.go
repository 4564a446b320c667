//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"embed"
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/core/tensor"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cogentcore/webgpu/wgpu"
)

//go:embed *.wgsl
var shaderFS embed.FS

// Available reports whether this build has a GPU backend compiled in (cgo or
// js builds). It does not probe for an adapter; see native.Open.
func Available() bool { return true }

const (
	uniSlot  = 256  // bytes per dispatch's uniform block (minUniformBufferOffsetAlignment)
	uniSlots = 2048 // dispatches per submission before an automatic flush
	maxBinds = 7    // storage bindings per kernel (WebGPU default limit is 8)
)

// gcMu serialises every GC-off readback window (SetGCPercent is process
// global) and any runtime.GC call made through GC.
var gcMu sync.Mutex

// GC runs a garbage collection under the readback lock. Code in a process
// that uses this package must not call runtime.GC or debug.FreeOSMemory
// directly while readbacks may be in flight (binding bug 3); call GC instead.
func GC() {
	gcMu.Lock()
	defer gcMu.Unlock()
	debug.FreeOSMemory()
}

var bufferIDs atomic.Uint64

// Buffer is a GPU storage buffer of 4-byte words (f32, u32 or two packed
// halves per word). Buffers are meant to be created at load time and reused.
type Buffer struct {
	d     *Device
	b     *wgpu.Buffer
	words int
	id    uint64
}

// Words is the buffer's length in 4-byte words.
func (b *Buffer) Words() int { return b.words }

// At returns a view of the buffer starting at word offset off.
func (b *Buffer) At(off int) View { return View{Buf: b, Off: off} }

// Release frees the buffer and the cached bind groups that reference it.
// Pending work that uses the buffer still completes (wgpu reference counts).
func (b *Buffer) Release() {
	if b == nil || b.b == nil {
		return
	}
	b.d.dropGroups(b.id)
	b.b.Release()
	b.b = nil
}

// View is a tensor inside a Buffer: Off is a word offset. Ops pass offsets
// to kernels in their uniform block (storage bindings always cover the whole
// buffer), so views need no alignment beyond 4 bytes.
type View struct {
	Buf *Buffer
	Off int
}

// part, if given, names the operand within what ("KDARecurrent", "Q"):
// the two are joined only for an error, so a check allocates nothing.
func (v View) check(words int, what string, part ...string) error {
	if v.Buf == nil || v.Buf.b == nil || v.Off < 0 || words < 0 || v.Off+words > v.Buf.words {
		return v.checkErr(words, joinWhat(what, part))
	}
	return nil
}

// joinWhat names an operand for an error: what and its parts.
func joinWhat(what string, part []string) string {
	return strings.Join(append([]string{what}, part...), " ")
}

func (v View) checkErr(words int, what string) error {
	if v.Buf == nil || v.Buf.b == nil {
		return fmt.Errorf("wgsl: %s: nil or released buffer", what)
	}
	if v.Off < 0 || words < 0 || v.Off+words > v.Buf.words {
		return fmt.Errorf("wgsl: %s: view [%d, %d) outside buffer of %d words", what, v.Off, v.Off+words, v.Buf.words)
	}
	return nil
}

type kernel struct {
	name  string
	file  string
	entry string
	nbuf  int
	qt    tensor.DType // the block format the module is specialised for (QT), or 0
	bgl   *wgpu.BindGroupLayout
	pl    *wgpu.PipelineLayout
	pipe  *wgpu.ComputePipeline
	index int
}

type groupKey struct {
	k    *kernel
	bufs [maxBinds]uint64
}

// Device is the portable GPU backend: storage buffers, cached pipelines and
// bind groups, one command encoder and compute pass per step into which ops
// record their dispatches, and readback. Ops never submit by themselves;
// Flush submits the recorded step and the Read methods flush, wait and copy
// back. A Device is not safe for concurrent use.
type Device struct {
	raw     *wgpu.Device
	q       *wgpu.Queue
	stage   stageBuf // writeQueue's staging (browser)
	info    string
	adapter AdapterInfo
	release func()

	modules map[string]*wgpu.ShaderModule
	kernels map[kernelKey]*kernel
	groups  map[groupKey]*wgpu.BindGroup
	// dummies[i] is bound at storage binding i+1 when that operand is
	// unused or read through another binding (one buffer per binding, so
	// placeholders never alias each other).
	dummies [maxBinds]*Buffer
	// trace, if set (tests), sees every dispatch's storage bindings.
	trace func(kernel string, binds []binding)
	// res is a decoded token's AttnRes read held back for the GEMV that
	// reads it (DeferAttnResNorm), while resHeld.
	res     resRead
	resHeld bool
	repeat  repeatFusions
	lanes   int // the GEMV kernels' threads per row; 0: by adapter (gemvLanes)

	enc  *wgpu.CommandEncoder
	pass *wgpu.ComputePassEncoder
	uni  []byte
	uBuf *wgpu.Buffer
	// per-dispatch scratch, kept here so that recording a dispatch
	// allocates nothing: the resolved bindings and the dynamic offset
	bound  [maxBinds]*Buffer
	uniOff [1]uint32
	// maps the staging buffer for read (submit_native.go, submit_js.go):
	// its callbacks are made once, so a readback allocates nothing
	mapper mapper

	staging      *wgpu.Buffer
	stagingBytes uint64
	scratch      map[string]*Buffer

	// Dispatches and Submits count recorded dispatches and submissions
	// since the device was created (for stats and tests).
	Dispatches, Submits int

	// longWaits counts the runners whose steps may take seconds (long
	// contexts): while it is positive, wait polls without blocking (bug
	// 5; submit_native.go).
	longWaits int
	// slow: a blocking wait took slowWait; waits poll from then on
	// (native; see wait).
	slow bool
	// bulkBytes counts the bytes of buffers created and written since the
	// last wait: a model upload's gigabyte can keep a CPU driver busy past
	// the 5 s blocking-wait limit, so a wait after bulk transfers polls.
	bulkBytes int64
}

// NewDevice wraps a device acquired by the platform code (native.Open, or a
// browser device made with wgpu.NewDevice). info describes the adapter;
// release, if not nil, is called by Close after everything else is freed.
func NewDevice(raw *wgpu.Device, info string, release func()) (*Device, error) {
	if raw == nil {
		return nil, errors.New("wgsl: NewDevice with nil device")
	}
	d := &Device{raw: raw, q: raw.GetQueue(), info: info, release: release,
		modules: map[string]*wgpu.ShaderModule{}, kernels: map[kernelKey]*kernel{},
		groups: map[groupKey]*wgpu.BindGroup{}, scratch: map[string]*Buffer{}}
	d.mapper.init()
	var err error
	d.uBuf, err = raw.CreateBuffer(&wgpu.BufferDescriptor{Size: uniSlot * uniSlots,
		Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst})
	if err != nil {
		return nil, fmt.Errorf("wgsl: uniform arena: %w", err)
	}
	for i := range d.dummies {
		if d.dummies[i], err = d.NewBuffer(64); err != nil {
			d.uBuf.Release()
			return nil, fmt.Errorf("wgsl: placeholder buffer %d: %w", i+1, err)
		}
	}
	return d, nil
}

// Info describes the adapter (name, driver, backend) as given to NewDevice.
func (d *Device) Info() string { return d.info }

// SetAdapter records what the platform code knows about the device's
// adapter (for ChooseAuto); Adapter returns it.
func (d *Device) SetAdapter(a AdapterInfo) { d.adapter = a }

// Adapter is the adapter description given to SetAdapter (zero if none).
func (d *Device) Adapter() AdapterInfo { return d.adapter }

// Close waits for pending work and releases every object the device created,
// then the device itself. Buffers created by the caller must be released
// by the caller before Close.
func (d *Device) Close() {
	if d == nil || d.raw == nil {
		return
	}
	_ = d.Sync()
	for _, g := range d.groups {
		g.Release()
	}
	for _, s := range d.scratch {
		s.Release()
	}
	for _, b := range d.dummies {
		b.Release()
	}
	for _, k := range d.kernels {
		k.pipe.Release()
		k.pl.Release()
		k.bgl.Release()
	}
	for _, m := range d.modules {
		m.Release()
	}
	if d.staging != nil {
		d.staging.Release()
	}
	d.mapper.release()
	d.uBuf.Release()
	d.q.Release()
	d.groups, d.kernels, d.modules = nil, nil, nil
	if d.release != nil {
		d.release()
	} else {
		d.raw.Release()
	}
	d.raw = nil
}

// NewBuffer creates a zero-filled storage buffer of words 4-byte words.
func (d *Device) NewBuffer(words int) (*Buffer, error) {
	if words <= 0 {
		return nil, fmt.Errorf("wgsl: NewBuffer(%d words)", words)
	}
	b, err := d.raw.CreateBuffer(&wgpu.BufferDescriptor{Size: uint64(words) * 4,
		Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc})
	if err != nil {
		return nil, fmt.Errorf("wgsl: create buffer of %d words: %w", words, err)
	}
	d.bulkBytes += int64(words) * 4 // zero-filled by the driver on first use
	return &Buffer{d: d, b: b, words: words, id: bufferIDs.Add(1)}, nil
}

// UploadF32 creates a buffer holding data.
func (d *Device) UploadF32(data []float32) (*Buffer, error) {
	b, err := d.NewBuffer(max(1, len(data)))
	if err != nil {
		return nil, err
	}
	if err := b.WriteF32(0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// UploadU32 creates a buffer holding data.
func (d *Device) UploadU32(data []uint32) (*Buffer, error) {
	b, err := d.NewBuffer(max(1, len(data)))
	if err != nil {
		return nil, err
	}
	if err := b.WriteU32(0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// WriteF32 uploads data at word offset off. Work recorded but not yet
// submitted is flushed first, so it sees the old contents (queue writes are
// otherwise ordered before the whole pending step).
func (b *Buffer) WriteF32(off int, data []float32) error {
	if len(data) == 0 {
		return nil
	}
	return b.writeBytes(off, len(data), wgpu.ToBytes(data))
}

// WriteU32 uploads data at word offset off (see WriteF32).
func (b *Buffer) WriteU32(off int, data []uint32) error {
	if len(data) == 0 {
		return nil
	}
	return b.writeBytes(off, len(data), wgpu.ToBytes(data))
}

func (b *Buffer) writeBytes(off, words int, p []byte) error {
	if err := b.At(off).check(words, "write"); err != nil {
		return err
	}
	if err := b.d.Flush(); err != nil {
		return err
	}
	if err := b.d.writeQueue(b.b, uint64(off)*4, p); err != nil {
		return fmt.Errorf("wgsl: write %d words at %d: %w", words, off, err)
	}
	b.d.bulkBytes += int64(len(p))
	return nil
}

// scratchBuf returns a device-owned scratch buffer of at least words words
// under the given name, growing it when needed (growth flushes first).
// scratchWords is the size scratchBuf allocates for a need of words: the
// next power of two from 1,024 (so a scratch grows a few times at most).
func scratchWords(words int) int {
	n := 1024
	for n < words {
		n *= 2
	}
	return n
}

func (d *Device) scratchBuf(name string, words int) (*Buffer, error) {
	if s := d.scratch[name]; s != nil && s.words >= words {
		return s, nil
	}
	if s := d.scratch[name]; s != nil {
		if err := d.Flush(); err != nil {
			return nil, err
		}
		s.Release()
		delete(d.scratch, name)
	}
	s, err := d.NewBuffer(scratchWords(words))
	if err != nil {
		return nil, err
	}
	d.scratch[name] = s
	return s, nil
}

// kernel returns the pipeline for entry point entry of file (a *.wgsl file
// embedded in the package) with nbuf storage bindings 1..nbuf and the
// uniform block at binding 0 (dynamic offset), creating it on first use.
// Layouts are always explicit (js has no "auto" layout: bug 10).
func (d *Device) kernel(file, entry string, nbuf int) (*kernel, error) {
	return d.variant(file, entry, nbuf, aliases{}, 0)
}

// weightKernel is kernel for a kernel reading weights of dt: for a block
// format (BlockFormat) its module is compiled with the constant QT = dt,
// so common.wgsl's block decoding (qscale, qvals) is specialised to that
// format — one pipeline per format, no per-element dtype switch.
func (d *Device) weightKernel(file, entry string, nbuf int, dt tensor.DType) (*kernel, error) {
	if !BlockFormat(dt) {
		dt = 0
	}
	return d.variant(file, entry, nbuf, aliases{}, dt)
}

// aliases maps storage binding i+1 to the binding it is read and written
// through (1-based; 0: its own). See resolve.
type aliases [maxBinds]uint8

func (a aliases) String() string {
	var b strings.Builder
	for i, j := range a {
		if j != 0 {
			fmt.Fprintf(&b, "|%d=%d", i+1, j)
		}
	}
	return b.String()
}

// storageDecls finds the storage binding declarations of a shader, one
// per line: "@group(0) @binding(N) var<storage, read_write> NAME: TYPE;".
// (No regexp: it would add ~0.1 MB gzip to the browser bundle.)
func storageDecls(src string) map[int][3]string {
	decls := map[int][3]string{} // binding → {name, type, whole line}
	for line := range strings.Lines(src) {
		rest, ok := strings.CutPrefix(line, "@group(0) @binding(")
		if !ok {
			continue
		}
		num, rest, ok := strings.Cut(rest, ") var<storage, read_write> ")
		if !ok {
			continue
		}
		name, typ, ok := strings.Cut(rest, ": ")
		if !ok {
			continue
		}
		typ, _, _ = strings.Cut(typ, ";")
		var b int
		if _, err := fmt.Sscan(num, &b); err == nil {
			decls[b] = [3]string{name, typ, line}
		}
	}
	return decls
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// renameIdent replaces the identifier from by to wherever it stands alone
// (not part of a longer identifier, not a member after '.').
func renameIdent(src, from, to string) string {
	var b strings.Builder
	for {
		i := strings.Index(src, from)
		if i < 0 {
			b.WriteString(src)
			return b.String()
		}
		j := i + len(from)
		alone := (i == 0 || !isIdent(src[i-1]) && src[i-1] != '.') && (j == len(src) || !isIdent(src[j]))
		b.WriteString(src[:i])
		if alone {
			b.WriteString(to)
		} else {
			b.WriteString(from)
		}
		src = src[j:]
	}
}

// aliasSource rewrites a shader so that each aliased binding's variable is
// replaced by the variable of the binding it aliases (same element type):
// with every binding covering its whole buffer, X[i] and O[i] then address
// the same words, so the kernel computes the same result while binding the
// buffer once (WebGPU forbids a buffer bound twice when one binding is
// writable). The aliased binding stays in the layout, bound to a
// placeholder, but the shader no longer uses it.
func aliasSource(file, src string, a aliases) (string, error) {
	decls := storageDecls(src)
	for i, j := range a {
		if j == 0 {
			continue
		}
		from, to := decls[i+1], decls[int(j)]
		if from[0] == "" || to[0] == "" {
			return "", fmt.Errorf("wgsl: %s: cannot alias binding %d to %d: no such storage binding", file, i+1, j)
		}
		if from[1] != to[1] {
			return "", fmt.Errorf("wgsl: %s: bindings %d (%s) and %d (%s) share a buffer but differ in type; pass distinct buffers",
				file, i+1, from[1], j, to[1])
		}
		src = renameIdent(strings.Replace(src, from[2], "", 1), from[0], to[0])
	}
	return src, nil
}

// variant is kernel with aliased bindings (see aliasSource); each variant
// is its own shader module and pipeline, created once.
func (d *Device) variant(file, entry string, nbuf int, a aliases, qt tensor.DType) (*kernel, error) {
	lanes := d.gemvLanes()
	if k := d.kernels[kernelKey{file, entry, a, qt, lanes}]; k != nil { // a struct key: the lookup allocates nothing
		return k, nil
	}
	spec := a.String()
	if qt != 0 {
		spec += "|" + qt.String()
	}
	if lanes != gpuLanes {
		spec += fmt.Sprintf("|lanes%d", lanes)
	}
	key := file + ":" + entry + spec
	modKey := file + spec
	mod := d.modules[modKey]
	if mod == nil {
		src, err := shaderFS.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("wgsl: shader %s: %w", file, err)
		}
		pre, err := prelude(string(src))
		if err != nil {
			return nil, err
		}
		// QT: the block format of weightKernel (0 otherwise; unused);
		// GEMV_LANES: the GEMV kernels' threads per row (gemvLanes)
		code, err := aliasSource(file, fmt.Sprintf("const QT: u32 = %du;\nconst GEMV_LANES: u32 = %du;\n", qt, lanes)+pre+string(src), a)
		if err != nil {
			return nil, err
		}
		mod, err = d.raw.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: modKey,
			WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: code}})
		if err != nil {
			return nil, fmt.Errorf("wgsl: compile %s: %w", modKey, err)
		}
		d.modules[modKey] = mod
	}
	entries := []wgpu.BindGroupLayoutEntry{{Binding: 0, Visibility: wgpu.ShaderStageCompute,
		Buffer: wgpu.BufferBindingLayout{Type: wgpu.BufferBindingTypeUniform, HasDynamicOffset: true, MinBindingSize: uniSlot}}}
	for i := 1; i <= nbuf; i++ {
		// All storage bindings are read_write (a buffer may not be bound
		// read-only and writable in one dispatch); no buffer is bound
		// twice in one dispatch (resolve).
		entries = append(entries, wgpu.BindGroupLayoutEntry{Binding: uint32(i), Visibility: wgpu.ShaderStageCompute,
			Buffer: wgpu.BufferBindingLayout{Type: wgpu.BufferBindingTypeStorage}})
	}
	k := &kernel{name: key, file: file, entry: entry, nbuf: nbuf, qt: qt, index: len(d.kernels)}
	var err error
	if k.bgl, err = d.raw.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Entries: entries}); err != nil {
		return nil, fmt.Errorf("wgsl: layout %s: %w", key, err)
	}
	if k.pl, err = d.raw.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{BindGroupLayouts: []*wgpu.BindGroupLayout{k.bgl}}); err != nil {
		k.bgl.Release()
		return nil, fmt.Errorf("wgsl: pipeline layout %s: %w", key, err)
	}
	if k.pipe, err = d.raw.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Layout: k.pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: entry}}); err != nil {
		k.pl.Release()
		k.bgl.Release()
		return nil, fmt.Errorf("wgsl: pipeline %s: %w", key, err)
	}
	d.kernels[kernelKey{file, entry, a, qt, lanes}] = k
	return k, nil
}

// kernelKey names a kernel variant: file, entry point, aliases, the
// block format its module is specialised for (weightKernel) and the GEMV
// lanes it was compiled with (gemvLanes).
type kernelKey struct {
	file, entry string
	a           aliases
	qt          tensor.DType
	lanes       int
}

// resolve makes a dispatch's storage bindings non-aliasing, as WebGPU
// requires of writable bindings (Chromium rejects "writable storage buffer
// binding aliasing"; native wgpu does not check). An operand given as nil
// is unused by the kernel and gets the binding's placeholder buffer; an
// operand whose buffer already fills an earlier binding is read and
// written through that binding (a shader variant, see aliasSource) and its
// own binding gets the placeholder. Both are fixed per call site, so the
// variants and bind groups are created once and cached. The bindings it
// returns are d.bound's, valid until the next dispatch.
func (d *Device) resolve(k *kernel, bufs []*Buffer) (*kernel, []*Buffer, error) {
	var a aliases
	out := &d.bound
	aliased := false
	for i, b := range bufs {
		out[i] = b
		if b == nil {
			out[i] = d.dummies[i]
			continue
		}
		if b.b == nil {
			return nil, nil, fmt.Errorf("wgsl: %s: binding %d: released buffer", k.name, i+1)
		}
		for j := 0; j < i; j++ {
			if bufs[j] != nil && bufs[j].id == b.id {
				a[i], out[i], aliased = uint8(j+1), d.dummies[i], true
				break
			}
		}
	}
	if aliased {
		var err error
		if k, err = d.variant(k.file, k.entry, k.nbuf, a, k.qt); err != nil {
			return nil, nil, err
		}
	}
	return k, out[:len(bufs)], nil
}

// binding describes one storage binding of a dispatch (for tests): the
// buffer's id, the bound byte range and whether the shader may write it.
type binding struct {
	Index        int
	Buffer       uint64
	Offset, Size uint64
	Writable     bool
}

func (d *Device) group(k *kernel, bufs []*Buffer) (*wgpu.BindGroup, error) {
	key := groupKey{k: k}
	for i, b := range bufs {
		if b == nil || b.b == nil {
			return nil, fmt.Errorf("wgsl: %s: binding %d: nil or released buffer", k.name, i+1)
		}
		key.bufs[i] = b.id
	}
	if g := d.groups[key]; g != nil {
		return g, nil
	}
	entries := []wgpu.BindGroupEntry{{Binding: 0, Buffer: d.uBuf, Size: uniSlot}}
	for i, b := range bufs {
		entries = append(entries, wgpu.BindGroupEntry{Binding: uint32(i + 1), Buffer: b.b, Size: wgpu.WholeSize})
	}
	g, err := d.raw.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: k.bgl, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("wgsl: bind group for %s: %w", k.name, err)
	}
	d.groups[key] = g
	return g, nil
}

func (d *Device) dropGroups(id uint64) {
	for key, g := range d.groups {
		for _, b := range key.bufs {
			if b == id {
				g.Release()
				delete(d.groups, key)
				break
			}
		}
	}
}

// params is a kernel's uniform block: u32 and f32 scalars in WGSL struct
// order, in a fixed array (a value: building it allocates nothing).
type params struct {
	n int
	w [uniSlot / 4]uint32
}

func (p params) u(v ...int) params {
	for _, x := range v {
		p = p.put(uint32(x))
	}
	return p
}

func (p params) f(v ...float32) params {
	for _, x := range v {
		p = p.put(math.Float32bits(x))
	}
	return p
}

// put appends one word (past the block's end it only counts, and dispatch
// refuses the block).
func (p params) put(w uint32) params {
	if p.n < len(p.w) {
		p.w[p.n] = w
	}
	p.n++
	return p
}

// maxGroups is the WebGPU default maxComputeWorkgroupsPerDimension.
const maxGroups = 65535

// gridX is the widest x dimension grid uses: maxGroups, lowered by tests
// to exercise the 2-D split with small shapes.
var gridX = maxGroups

// grid spreads n workgroups over x and y (kernels flatten them as
// wid.x + wid.y·num_workgroups.x and return when past n).
func grid(n int) (uint32, uint32) {
	if n <= gridX {
		return uint32(max(n, 1)), 1
	}
	return uint32(gridX), uint32((n + gridX - 1) / gridX)
}

// dispatch records one dispatch of k over groups workgroups (flattened,
// split over x and y) into the current step.
func (d *Device) dispatch(k *kernel, p params, bufs []*Buffer, groups int) error {
	if len(bufs) != k.nbuf {
		return fmt.Errorf("wgsl: %s: %d buffers for %d bindings", k.name, len(bufs), k.nbuf)
	}
	if p.n*4 > uniSlot {
		return fmt.Errorf("wgsl: %s: uniform block of %d bytes", k.name, p.n*4)
	}
	if groups <= 0 {
		return nil
	}
	if groups > gridX*maxGroups {
		return fmt.Errorf("wgsl: %s: %d workgroups", k.name, groups)
	}
	gx, gy := grid(groups)
	return d.dispatchGrid(k, p, bufs, gx, gy)
}

// dispatchGrid records one dispatch of k over a gx×gy grid of workgroups.
func (d *Device) dispatchGrid(k *kernel, p params, bufs []*Buffer, gx, gy uint32) error {
	if len(bufs) != k.nbuf {
		return fmt.Errorf("wgsl: %s: %d buffers for %d bindings", k.name, len(bufs), k.nbuf)
	}
	if p.n*4 > uniSlot {
		return fmt.Errorf("wgsl: %s: uniform block of %d bytes", k.name, p.n*4)
	}
	if gx == 0 || gy == 0 {
		return nil
	}
	if err := d.flushRes(); err != nil {
		return err
	}
	k, bufs, err := d.resolve(k, bufs)
	if err != nil {
		return err
	}
	if d.trace != nil {
		binds := make([]binding, len(bufs))
		for i, b := range bufs {
			binds[i] = binding{Index: i + 1, Buffer: b.id, Size: uint64(b.words) * 4, Writable: true}
		}
		d.trace(k.name, binds)
	}
	g, err := d.group(k, bufs)
	if err != nil {
		return err
	}
	if len(d.uni) >= uniSlot*uniSlots {
		if err := d.Flush(); err != nil {
			return err
		}
	}
	if d.enc == nil {
		if d.enc, err = d.raw.CreateCommandEncoder(nil); err != nil {
			return fmt.Errorf("wgsl: command encoder: %w", err)
		}
		d.pass = d.enc.BeginComputePass(nil)
	}
	off := uint32(len(d.uni))
	var slot [uniSlot]byte
	copy(slot[:], wgpu.ToBytes(p.w[:p.n]))
	d.uni = append(d.uni, slot[:]...)
	d.pass.SetPipeline(k.pipe)
	d.uniOff[0] = off
	d.pass.SetBindGroup(0, g, d.uniOff[:])
	d.pass.DispatchWorkgroups(gx, gy, 1) // explicit 1s: bug 11
	d.Dispatches++
	return nil
}

// finish ends the open pass, lets extra record copies into the encoder, and
// submits the step. It returns with nothing pending.
func (d *Device) finish(extra func(enc *wgpu.CommandEncoder) error) (submission, error) {
	var zero submission
	if err := d.flushRes(); err != nil {
		return zero, err
	}
	if d.enc == nil {
		if extra == nil {
			return zero, nil
		}
		var err error
		if d.enc, err = d.raw.CreateCommandEncoder(nil); err != nil {
			return zero, fmt.Errorf("wgsl: command encoder: %w", err)
		}
	}
	enc := d.enc
	d.enc = nil
	defer enc.Release()
	if d.pass != nil {
		d.pass.End() // statement form: returns error natively, nothing on js
		d.pass.Release()
		d.pass = nil
	}
	if len(d.uni) > 0 {
		err := d.writeQueue(d.uBuf, 0, d.uni)
		d.uni = d.uni[:0]
		if err != nil {
			return zero, fmt.Errorf("wgsl: upload uniforms: %w", err)
		}
	}
	if extra != nil {
		if err := extra(enc); err != nil {
			return zero, err
		}
	}
	cmd, err := enc.Finish(nil)
	if err != nil {
		return zero, fmt.Errorf("wgsl: finish step: %w", err)
	}
	defer cmd.Release()
	d.Submits++
	return d.submit(cmd), nil
}

// Flush submits the work recorded so far without waiting for it.
func (d *Device) Flush() error {
	_, err := d.finish(nil)
	return err
}

// Sync submits the work recorded so far and waits until the GPU is done.
func (d *Device) Sync() error {
	s, err := d.finish(nil)
	if err != nil {
		return err
	}
	d.wait(s)
	return nil
}

// ReadF32 flushes the step, waits for it and copies len(dst) floats from v.
func (d *Device) ReadF32(v View, dst []float32) error {
	if len(dst) == 0 {
		return nil
	}
	return d.read(v, len(dst), wgpu.ToBytes(dst))
}

// ReadU32 flushes the step, waits for it and copies len(dst) words from v.
func (d *Device) ReadU32(v View, dst []uint32) error {
	if len(dst) == 0 {
		return nil
	}
	return d.read(v, len(dst), wgpu.ToBytes(dst))
}

// read is the only place that maps a buffer: it copies words 32-bit words
// of v into dst through the staging buffer (grown to the next power of two
// when too small). Each submission waited for here must stay well under
// 5 s (bug 5; see wait).
func (d *Device) read(v View, words int, dst []byte) error {
	if err := v.check(words, "read"); err != nil {
		return err
	}
	size := uint64(words) * 4
	if d.stagingBytes < size {
		if err := d.Flush(); err != nil {
			return err
		}
		if d.staging != nil {
			d.staging.Release()
			d.staging, d.stagingBytes = nil, 0
		}
		n := uint64(4096)
		for n < size {
			n *= 2
		}
		st, err := d.raw.CreateBuffer(&wgpu.BufferDescriptor{Size: n, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			return fmt.Errorf("wgsl: staging buffer of %d bytes: %w", n, err)
		}
		d.staging, d.stagingBytes = st, n
	}
	sub, err := d.finish(func(enc *wgpu.CommandEncoder) error {
		if err := enc.CopyBufferToBuffer(v.Buf.b, uint64(v.Off)*4, d.staging, 0, size); err != nil {
			return fmt.Errorf("wgsl: copy to staging: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.wait(sub)
	return d.readStaging(size, dst)
}
