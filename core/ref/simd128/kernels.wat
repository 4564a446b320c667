;; tessera's WebAssembly SIMD128 kernels for the browser's CPU path.
;;
;; Go's wasm compiler emits no SIMD instructions, so the matrix products of
;; Linear run here instead: a module that imports the linear memory of
;; tessera's Go instance (env.mem) and works on Go slices in place.
;; core/ref/simd_js.go instantiates it and calls `rows` / `gemm` bound to
;; the address of a parameter block (no arguments cross the JS boundary,
;; nothing is allocated per call).
;;
;; Parameter block (little-endian i32 at p):
;;   p+0  dtype   0 F32, 1 F16, 2 BF16, 3 Q8 (int8 with one f32 scale per row)
;;   p+4  w       address of row 0 of the weights (rows contiguous, n each)
;;   p+8  x       address of token 0's activations (tokens contiguous, n f32 each)
;;   p+12 n       columns
;;   p+16 out     address of out[0]
;;   p+20 rows    number of weight rows
;;   p+24 scale   Q8 only: address of rows f32 scales
;;   p+28 T       gemm only: tokens
;;   p+32 ldo     gemm only: out stride between tokens, in f32
;;
;; rows:  out[r]         = W[r,:]·x       for r < rows         (decode)
;; gemm:  out[t·ldo + r] = W[r,:]·x[t,:]  for r < rows, t < T  (prefill)
;;
;; Every output, whichever kernel and tile computes it, is summed in one
;; order: per 16 columns, four f32x4 products added one after the other to
;; one f32x4 accumulator; then (lane0+lane1)+(lane2+lane3); then the tail
;; columns one by one; then × scale (Q8). So a prefilled token gets the bits
;; a decoded one gets, and a row's bits do not depend on how rows are cut.
;; Tiles: rows takes four rows per activation load, gemm four tokens per
;; widened weight vector. F16 is widened exactly (normals, subnormals, ±Inf,
;; NaN) by moving exponent and mantissa into f32 position and scaling by
;; 2^112; BF16 by a 16-bit shift; Q8 by sign extension.
;;
;; Regenerate kernels.wasm with `go generate ./core/ref` (wat2wasm, Debian
;; wabt); TestSIMD128ModuleIsAssembledFromSource checks it.
(module
  (import "env" "mem" (memory 1))

  ;; f16x4 widens four f16 bit patterns (zero-extended i32 lanes) to f32.
  (func $f16x4 (param $h v128) (result v128)
    (local $m v128)
    (local.set $m (i32x4.shl (v128.and (local.get $h) (v128.const i32x4 0x7fff 0x7fff 0x7fff 0x7fff)) (i32.const 13)))
    (v128.or
      (i32x4.shl (v128.and (local.get $h) (v128.const i32x4 0x8000 0x8000 0x8000 0x8000)) (i32.const 16))
      (v128.bitselect
        ;; exponent 31: Inf or NaN keeps its mantissa under an all-ones exponent
        (v128.or (local.get $m) (v128.const i32x4 0x70000000 0x70000000 0x70000000 0x70000000))
        ;; finite: rebias the exponent by 2^112 (exact, subnormals included)
        (f32x4.mul (local.get $m) (v128.const i32x4 0x77800000 0x77800000 0x77800000 0x77800000))
        (i32x4.ge_u (local.get $m) (v128.const i32x4 0x0f800000 0x0f800000 0x0f800000 0x0f800000)))))

  ;; esz is log2 of the bytes per weight of dtype dt.
  (func $esz (param $dt i32) (result i32)
    (select (i32.const 2)
      (select (i32.const 1) (i32.const 0) (i32.lt_u (local.get $dt) (i32.const 3)))
      (i32.eqz (local.get $dt))))

  ;; wv is the four weights from column e of the row at w, as f32x4.
  (func $wv (param $w i32) (param $e i32) (param $dt i32) (result v128)
    (block $q8
      (block $bf
        (block $f16
          (block $f32
            (br_table $f32 $f16 $bf $q8 (local.get $dt)))
          (return (v128.load (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 2))))))
        (return (call $f16x4 (v128.load16x4_u (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 1)))))))
      (return (i32x4.shl (v128.load16x4_u (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 1)))) (i32.const 16))))
    (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (i16x8.extend_low_i8x16_s
      (v128.load32_zero (i32.add (local.get $w) (local.get $e)))))))

  ;; ws is the weight at column e of the row at w, as f32.
  (func $ws (param $w i32) (param $e i32) (param $dt i32) (result f32)
    (block $q8
      (block $bf
        (block $f16
          (block $f32
            (br_table $f32 $f16 $bf $q8 (local.get $dt)))
          (return (f32.load (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 2))))))
        (return (f32x4.extract_lane 0 (call $f16x4 (i32x4.splat
          (i32.load16_u (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 1)))))))))
      (return (f32.reinterpret_i32 (i32.shl
        (i32.load16_u (i32.add (local.get $w) (i32.shl (local.get $e) (i32.const 1)))) (i32.const 16)))))
    (f32.convert_i32_s (i32.load8_s (i32.add (local.get $w) (local.get $e)))))

  ;; lanes is (a0+a1)+(a2+a3) of an accumulator.
  (func $lanes (param $a v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
      (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))

  ;; xv is the four activations from column e of the vector at x.
  (func $xv (param $x i32) (param $e i32) (result v128)
    (v128.load (i32.add (local.get $x) (i32.shl (local.get $e) (i32.const 2)))))

  ;; xs is the activation at column e of the vector at x.
  (func $xs (param $x i32) (param $e i32) (result f32)
    (f32.load (i32.add (local.get $x) (i32.shl (local.get $e) (i32.const 2)))))

  ;; dot1 is one output: the row at w times the vector at x (before scale).
  (func $dot1 (param $w i32) (param $x i32) (param $n i32) (param $dt i32) (result f32)
    (local $a v128) (local $k i32) (local $n16 i32) (local $s f32)
    (local.set $n16 (i32.and (local.get $n) (i32.const -16)))
    (block $vdone
      (loop $v
        (br_if $vdone (i32.ge_u (local.get $k) (local.get $n16)))
        (local.set $a (f32x4.add (local.get $a) (f32x4.mul (call $wv (local.get $w) (local.get $k) (local.get $dt)) (call $xv (local.get $x) (local.get $k)))))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (local.set $a (f32x4.add (local.get $a) (f32x4.mul (call $wv (local.get $w) (local.get $k) (local.get $dt)) (call $xv (local.get $x) (local.get $k)))))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (local.set $a (f32x4.add (local.get $a) (f32x4.mul (call $wv (local.get $w) (local.get $k) (local.get $dt)) (call $xv (local.get $x) (local.get $k)))))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (local.set $a (f32x4.add (local.get $a) (f32x4.mul (call $wv (local.get $w) (local.get $k) (local.get $dt)) (call $xv (local.get $x) (local.get $k)))))
        (local.set $k (i32.add (local.get $k) (i32.const 4)))
        (br $v)))
    (local.set $s (call $lanes (local.get $a)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $k) (local.get $n)))
        (local.set $s (f32.add (local.get $s) (f32.mul (call $ws (local.get $w) (local.get $k) (local.get $dt)) (call $xs (local.get $x) (local.get $k)))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $t)))
    (local.get $s))

  ;; scaled is s × scale[r] for Q8 and s otherwise.
  (func $scaled (param $s f32) (param $dt i32) (param $sc i32) (param $r i32) (result f32)
    (if (result f32) (i32.eq (local.get $dt) (i32.const 3))
      (then (f32.mul (local.get $s) (f32.load (i32.add (local.get $sc) (i32.shl (local.get $r) (i32.const 2))))))
      (else (local.get $s))))

  (func (export "rows") (param $p i32)
    (local $dt i32) (local $w i32) (local $x i32) (local $n i32) (local $out i32) (local $rows i32) (local $sc i32)
    (local $rb i32) (local $r i32) (local $k i32) (local $n16 i32)
    (local $w0 i32) (local $w1 i32) (local $w2 i32) (local $w3 i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $xv v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $xs f32)
    (local.set $dt (i32.load offset=0 (local.get $p)))
    (local.set $w (i32.load offset=4 (local.get $p)))
    (local.set $x (i32.load offset=8 (local.get $p)))
    (local.set $n (i32.load offset=12 (local.get $p)))
    (local.set $out (i32.load offset=16 (local.get $p)))
    (local.set $rows (i32.load offset=20 (local.get $p)))
    (local.set $sc (i32.load offset=24 (local.get $p)))
    (if (i32.gt_u (local.get $dt) (i32.const 3)) (then (unreachable)))
    (local.set $rb (i32.shl (local.get $n) (call $esz (local.get $dt))))
    (local.set $n16 (i32.and (local.get $n) (i32.const -16)))
    ;; four rows per activation load
    (block $fdone
      (loop $four
        (br_if $fdone (i32.gt_u (i32.add (local.get $r) (i32.const 4)) (local.get $rows)))
        (local.set $w0 (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $w1 (i32.add (local.get $w0) (local.get $rb)))
        (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
        (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
        (local.set $a0 (v128.const i32x4 0 0 0 0))
        (local.set $a1 (v128.const i32x4 0 0 0 0))
        (local.set $a2 (v128.const i32x4 0 0 0 0))
        (local.set $a3 (v128.const i32x4 0 0 0 0))
        (local.set $k (i32.const 0))
        (block $vdone
          (loop $v
            (br_if $vdone (i32.ge_u (local.get $k) (local.get $n16)))
            (local.set $xv (call $xv (local.get $x) (local.get $k)))
            (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (call $wv (local.get $w0) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (call $wv (local.get $w1) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (call $wv (local.get $w2) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (call $wv (local.get $w3) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $k (i32.add (local.get $k) (i32.const 4)))
            (local.set $xv (call $xv (local.get $x) (local.get $k)))
            (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (call $wv (local.get $w0) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (call $wv (local.get $w1) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (call $wv (local.get $w2) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (call $wv (local.get $w3) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $k (i32.add (local.get $k) (i32.const 4)))
            (local.set $xv (call $xv (local.get $x) (local.get $k)))
            (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (call $wv (local.get $w0) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (call $wv (local.get $w1) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (call $wv (local.get $w2) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (call $wv (local.get $w3) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $k (i32.add (local.get $k) (i32.const 4)))
            (local.set $xv (call $xv (local.get $x) (local.get $k)))
            (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (call $wv (local.get $w0) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (call $wv (local.get $w1) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (call $wv (local.get $w2) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (call $wv (local.get $w3) (local.get $k) (local.get $dt)) (local.get $xv))))
            (local.set $k (i32.add (local.get $k) (i32.const 4)))
            (br $v)))
        (local.set $s0 (call $lanes (local.get $a0)))
        (local.set $s1 (call $lanes (local.get $a1)))
        (local.set $s2 (call $lanes (local.get $a2)))
        (local.set $s3 (call $lanes (local.get $a3)))
        (block $tdone
          (loop $t
            (br_if $tdone (i32.ge_u (local.get $k) (local.get $n)))
            (local.set $xs (call $xs (local.get $x) (local.get $k)))
            (local.set $s0 (f32.add (local.get $s0) (f32.mul (call $ws (local.get $w0) (local.get $k) (local.get $dt)) (local.get $xs))))
            (local.set $s1 (f32.add (local.get $s1) (f32.mul (call $ws (local.get $w1) (local.get $k) (local.get $dt)) (local.get $xs))))
            (local.set $s2 (f32.add (local.get $s2) (f32.mul (call $ws (local.get $w2) (local.get $k) (local.get $dt)) (local.get $xs))))
            (local.set $s3 (f32.add (local.get $s3) (f32.mul (call $ws (local.get $w3) (local.get $k) (local.get $dt)) (local.get $xs))))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $t)))
        (f32.store offset=0 (local.get $out) (call $scaled (local.get $s0) (local.get $dt) (local.get $sc) (local.get $r)))
        (f32.store offset=4 (local.get $out) (call $scaled (local.get $s1) (local.get $dt) (local.get $sc) (i32.add (local.get $r) (i32.const 1))))
        (f32.store offset=8 (local.get $out) (call $scaled (local.get $s2) (local.get $dt) (local.get $sc) (i32.add (local.get $r) (i32.const 2))))
        (f32.store offset=12 (local.get $out) (call $scaled (local.get $s3) (local.get $dt) (local.get $sc) (i32.add (local.get $r) (i32.const 3))))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $r (i32.add (local.get $r) (i32.const 4)))
        (br $four)))
    ;; the last rows one at a time
    (block $done
      (loop $one
        (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
        (f32.store (local.get $out) (call $scaled
          (call $dot1 (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))) (local.get $x) (local.get $n) (local.get $dt))
          (local.get $dt) (local.get $sc) (local.get $r)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $one))))

  (func (export "gemm") (param $p i32)
    (local $dt i32) (local $w i32) (local $x i32) (local $n i32) (local $out i32) (local $rows i32) (local $sc i32)
    (local $T i32) (local $ldo i32)
    (local $rb i32) (local $xb i32) (local $r i32) (local $t i32) (local $k i32) (local $n16 i32) (local $wr i32)
    (local $x0 i32) (local $x1 i32) (local $x2 i32) (local $x3 i32) (local $o i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $wv v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $ws f32)
    (local.set $dt (i32.load offset=0 (local.get $p)))
    (local.set $w (i32.load offset=4 (local.get $p)))
    (local.set $x (i32.load offset=8 (local.get $p)))
    (local.set $n (i32.load offset=12 (local.get $p)))
    (local.set $out (i32.load offset=16 (local.get $p)))
    (local.set $rows (i32.load offset=20 (local.get $p)))
    (local.set $sc (i32.load offset=24 (local.get $p)))
    (local.set $T (i32.load offset=28 (local.get $p)))
    (local.set $ldo (i32.shl (i32.load offset=32 (local.get $p)) (i32.const 2)))
    (if (i32.gt_u (local.get $dt) (i32.const 3)) (then (unreachable)))
    (local.set $rb (i32.shl (local.get $n) (call $esz (local.get $dt))))
    (local.set $xb (i32.shl (local.get $n) (i32.const 2)))
    (local.set $n16 (i32.and (local.get $n) (i32.const -16)))
    (block $rdone
      (loop $row
        (br_if $rdone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        ;; out address of (token 0, row r)
        (local.set $o (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))))
        (local.set $t (i32.const 0))
        ;; four tokens per widened weight vector
        (block $fdone
          (loop $four
            (br_if $fdone (i32.gt_u (i32.add (local.get $t) (i32.const 4)) (local.get $T)))
            (local.set $x0 (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xb))))
            (local.set $x1 (i32.add (local.get $x0) (local.get $xb)))
            (local.set $x2 (i32.add (local.get $x1) (local.get $xb)))
            (local.set $x3 (i32.add (local.get $x2) (local.get $xb)))
            (local.set $a0 (v128.const i32x4 0 0 0 0))
            (local.set $a1 (v128.const i32x4 0 0 0 0))
            (local.set $a2 (v128.const i32x4 0 0 0 0))
            (local.set $a3 (v128.const i32x4 0 0 0 0))
            (local.set $k (i32.const 0))
            (block $vdone
              (loop $v
                (br_if $vdone (i32.ge_u (local.get $k) (local.get $n16)))
                (local.set $wv (call $wv (local.get $wr) (local.get $k) (local.get $dt)))
                (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $wv) (call $xv (local.get $x0) (local.get $k)))))
                (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $wv) (call $xv (local.get $x1) (local.get $k)))))
                (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $wv) (call $xv (local.get $x2) (local.get $k)))))
                (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $wv) (call $xv (local.get $x3) (local.get $k)))))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (local.set $wv (call $wv (local.get $wr) (local.get $k) (local.get $dt)))
                (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $wv) (call $xv (local.get $x0) (local.get $k)))))
                (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $wv) (call $xv (local.get $x1) (local.get $k)))))
                (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $wv) (call $xv (local.get $x2) (local.get $k)))))
                (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $wv) (call $xv (local.get $x3) (local.get $k)))))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (local.set $wv (call $wv (local.get $wr) (local.get $k) (local.get $dt)))
                (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $wv) (call $xv (local.get $x0) (local.get $k)))))
                (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $wv) (call $xv (local.get $x1) (local.get $k)))))
                (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $wv) (call $xv (local.get $x2) (local.get $k)))))
                (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $wv) (call $xv (local.get $x3) (local.get $k)))))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (local.set $wv (call $wv (local.get $wr) (local.get $k) (local.get $dt)))
                (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $wv) (call $xv (local.get $x0) (local.get $k)))))
                (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $wv) (call $xv (local.get $x1) (local.get $k)))))
                (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $wv) (call $xv (local.get $x2) (local.get $k)))))
                (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $wv) (call $xv (local.get $x3) (local.get $k)))))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (br $v)))
            (local.set $s0 (call $lanes (local.get $a0)))
            (local.set $s1 (call $lanes (local.get $a1)))
            (local.set $s2 (call $lanes (local.get $a2)))
            (local.set $s3 (call $lanes (local.get $a3)))
            (block $tdone
              (loop $tail
                (br_if $tdone (i32.ge_u (local.get $k) (local.get $n)))
                (local.set $ws (call $ws (local.get $wr) (local.get $k) (local.get $dt)))
                (local.set $s0 (f32.add (local.get $s0) (f32.mul (local.get $ws) (call $xs (local.get $x0) (local.get $k)))))
                (local.set $s1 (f32.add (local.get $s1) (f32.mul (local.get $ws) (call $xs (local.get $x1) (local.get $k)))))
                (local.set $s2 (f32.add (local.get $s2) (f32.mul (local.get $ws) (call $xs (local.get $x2) (local.get $k)))))
                (local.set $s3 (f32.add (local.get $s3) (f32.mul (local.get $ws) (call $xs (local.get $x3) (local.get $k)))))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (br $tail)))
            (f32.store (local.get $o) (call $scaled (local.get $s0) (local.get $dt) (local.get $sc) (local.get $r)))
            (local.set $o (i32.add (local.get $o) (local.get $ldo)))
            (f32.store (local.get $o) (call $scaled (local.get $s1) (local.get $dt) (local.get $sc) (local.get $r)))
            (local.set $o (i32.add (local.get $o) (local.get $ldo)))
            (f32.store (local.get $o) (call $scaled (local.get $s2) (local.get $dt) (local.get $sc) (local.get $r)))
            (local.set $o (i32.add (local.get $o) (local.get $ldo)))
            (f32.store (local.get $o) (call $scaled (local.get $s3) (local.get $dt) (local.get $sc) (local.get $r)))
            (local.set $o (i32.add (local.get $o) (local.get $ldo)))
            (local.set $t (i32.add (local.get $t) (i32.const 4)))
            (br $four)))
        ;; the last tokens one at a time
        (block $done
          (loop $one
            (br_if $done (i32.ge_u (local.get $t) (local.get $T)))
            (f32.store (local.get $o) (call $scaled
              (call $dot1 (local.get $wr) (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xb))) (local.get $n) (local.get $dt))
              (local.get $dt) (local.get $sc) (local.get $r)))
            (local.set $o (i32.add (local.get $o) (local.get $ldo)))
            (local.set $t (i32.add (local.get $t) (i32.const 1)))
            (br $one)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))
)
