#!/usr/bin/env bash
# optimized/cuda/bench/device_run.sh -- everything one call on the GPU machine does, in order:
# the CUDA property tests, compute-sanitizer (memcheck, racecheck) on a representative test, and
# the benchmark against fla and SDPA. Built here, run there: the binaries and fla's source are
# carried (build/cuda/..., .fla); logs go to $OUT. Stages are bounded with timeout so a slow stage
# cannot eat the whole call. Usage: bash optimized/cuda/bench/device_run.sh [stages...]
#   stages: tests sanitize mutants bench (default: all) for the forward; btests bsanitize bmutants
#   bbench for the backward (test_cuda_backward, its sanitizer runs and planted bugs,
#   bench_backward.py); smutants for the saved forward's planted bugs (test_cuda_saved). BENCH_ARGS adds
#   arguments to bench_forward.py, BBENCH_ARGS to bench_backward.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build/cuda
# BIN: a folder holding (stripped) copies of the three binaries, to carry less; default: the build.
TEST=${BIN:-$B/proofs_tests}/test_cuda_forward
BTEST=${BIN:-$B/proofs_tests}/test_cuda_backward
LIB=${BIN:-$B/optimized/cuda}/liblinattn_cuda_capi.so
stages=${*:-tests sanitize mutants bench}
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
if [ -f .tcache/triton_cache.tgz ]; then mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache; fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; } | tee "$OUT/env.log"
for s in $stages; do
  case $s in
    tests)
      echo "=== tests: $TEST"
      ( time timeout 240 "$TEST" --durations yes ) 2>&1 | tee "$OUT/tests.log" | grep -v "^  [0-9.]* s: " | tail -40 ;;
    sanitize)
      F='CUDA chunked forward of a packed batch of many short sequences equals the reference'
      for tool in memcheck racecheck; do
        echo "=== compute-sanitizer --tool $tool: $F"
        ( time timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$TEST" "$F" ) 2>&1 | tee "$OUT/sanitize_$tool.log" | tail -8
      done ;;
    mutants)
      # Each planted bug (make_mutants.py) must make the tests aimed at it fail. MUT_ONLY=v6: forward
      # rung 6's mutants alone (80-84, with the no-bug baseline on the same tests).
      M=${MBIN:-build/mutants}/test_cuda_forward
      P1='CUDA v1 chunked forward equals the float64 reference for every operator in float32'
      P2='CUDA v2 tensor-core chunked forward equals the float64 reference for every operator in bfloat16'
      P3='CUDA v3 chunked forward equals the float64 reference for every operator in bfloat16'
      P4='CUDA v4 chunked forward equals the float64 reference for every operator in bfloat16'
      P5='CUDA v5 split forward equals the float64 reference for every operator in bfloat16'
      BIT5='CUDA v5 split forward equals v4 fused forward bit for bit'
      SZ='CUDA chunked forward is exact at the tuned and the largest head sizes up to K = V = 256'
      T1='CUDA chunked forward at T = 1 equals one step of the reference'
      CT='CUDA chunked forward over 0 to T equals 0 to t then t to T with the state carried'
      PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
      DT='CUDA chunked forward is deterministic: two runs give bitwise equal outputs'
      RG='CUDA chunked forward with ragged last chunks equals the reference for lengths around 64'
      # Mutant 0 (no bug) keeps its whole output in mutant0_full.log: a failure there is the test's
      # own (e.g. a RapidCheck case outside the stated bounds), printed with the case.
      run_m() { local n=$1; shift; for t in "$@"; do
          o=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261129 max_success=30" timeout 60 $M "$t" 2>&1)
          [ "$n" = 0 ] && printf '%s\n' "=== $t" "$o" >> "$OUT/mutant0_full.log"
          r=$(printf '%s\n' "$o" | grep -E "^test cases|^All tests passed" | tail -1)
          echo "mutant $n | $t | ${r:-no summary (crash or timeout)}"; done; }
      P6='CUDA v6 lean chunked forward equals the float64 reference for every operator in bfloat16'
      OWN6='CUDA v6 lean forward runs its own kernels for DeltaNet and GDN in bfloat16'
      OUT6='CUDA v6 lean forward outside its range equals the rung best runs there bit for bit'
      # Rung 6 (v6_lean.cu): 80-82 and 84 break GDN only (DeltaNet's factors are scale and 1), 83 both.
      mut_v6() {
        run_m 0 "$P6" "$OWN6" "$OUT6" "$RG" "$CT"
        run_m 80 "$P6" "$RG"
        run_m 81 "$P6" "$RG"
        run_m 82 "$P6" "$RG"
        run_m 83 "$P6" "$RG" "$CT"
        run_m 84 "$P6" "$RG"
      }
      if [ "${MUT_ONLY:-}" = v6 ]; then mut_v6 2>&1 | tee "$OUT/mutants_v6.log"; continue; fi
      {
        run_m 0 "$P1" "$P3"
        run_m 1 "$P1"
        run_m 2 "$P1" "$T1"
        run_m 3 "$P2" "$P3" "$CT"
        run_m 4 "$P2" "$RG"
        run_m 5 "$PK" "$P1"
        run_m 6 "$DT" "$P3"
        run_m 7 "$P2" "$RG"
        run_m 8 "$P3" "$RG"
        run_m 0 "$P4" "$RG" "$SZ"
        run_m 31 "$P4" "$RG"
        run_m 32 "$P4" "$RG"
        run_m 33 "$DT" "$P4"
        run_m 34 "$P4" "$RG"
        run_m 35 "$P4" "$RG"
        run_m 36 "$P4" "$RG"
        run_m 37 "$P4" "$SZ"
        echo "mutant 33 under compute-sanitizer racecheck, $PK:"
        LINATTN_MUTANT=33 timeout 120 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        run_m 0 "$P5" "$BIT5" "$RG" "$SZ"
        run_m 61 "$P5" "$RG"
        run_m 62 "$P5" "$T1"
        run_m 63 "$DT" "$P5"
        run_m 64 "$SZ" "$BIT5"
        run_m 65 "$P5" "$RG"
        echo "mutant 63 under compute-sanitizer racecheck, $PK:"
        LINATTN_MUTANT=63 timeout 120 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        mut_v6
      } 2>&1 | tee "$OUT/mutants.log" ;;
    btests)
      echo "=== backward tests: $BTEST"
      ( time LINATTN_CUDA_BACKWARD_REPORT=1 timeout 420 "$BTEST" --durations yes ) 2>&1 | tee "$OUT/btests.log" | grep -v "^  [0-9.]* s: " | tail -60 ;;
    bsanitize)
      # The packed batch (many short sequences, K, V <= 64) and T = 1 at head sizes up to 128 x 128
      # (rung 2's multi-slab paths: two 64-column slabs of K and of V).
      for F in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
               'CUDA chunked backward at T = 1 equals one step of the reference backward'; do
        tag=$(echo "$F" | grep -q "T = 1" && echo t1 || echo packed)
        for tool in memcheck racecheck; do
          echo "=== compute-sanitizer --tool $tool: $F"
          ( time timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$BTEST" "$F" ) 2>&1 | tee "$OUT/bsanitize_${tool}_$tag.log" | tail -8
        done
      done
      # memcheck over the odd head sizes of rung 8's bit test (K = 36 V = 20, K = 18 V = 22, V = 23: every
      # rung's prepare, i.e. the forward's intra kernel too; it found the GDN2 float32-gate read past
      # the end of w in tci::load_vtile, session 8 call 4).
      OB='CUDA v8 chunked backward gives rung 7 gradients bit for bit'
      echo "=== compute-sanitizer --tool memcheck: $OB"
      ( time timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$BTEST" "$OB" ) 2>&1 | tee "$OUT/bsanitize_memcheck_oddsizes.log" | tail -8
      # Bitwise determinism, many times (a race between float atomics shows only now and then).
      DT='CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
      fails=0; for r in $(seq 1 ${DET_REPEATS:-50}); do timeout 60 "$BTEST" "$DT" > /dev/null 2>&1 || fails=$((fails + 1)); done
      echo "determinism test: $fails failures in ${DET_REPEATS:-50} runs" | tee "$OUT/bdeterminism.log" ;;
    bmutants)
      # Each planted bug of the backward (make_mutants.py, 11-16 rung 1, 21-24 rung 2, 41-49 rung 3, 51-55
      # rung 4, 50 and 56-59 rung 5, 66-68 rung 6, 69-72 rung 7, 73-79 and 85-86 rung 8, 87-91 rung 9, 98-105 rung 10, 120-128 rung 11, 140-146 rung 12, 150-160 rung 14, 170-182 rung 15, 190-203 rung 16, 210-216 rung 17, 240-244 rung 18; 5 is shared with the forward)
      # must make the tests aimed at it fail.
      M=${MBIN:-build/mutants}/test_cuda_backward
      P32='CUDA v1 chunked backward equals the float64 reference backward for every operator in float32'
      P16='CUDA v1 chunked backward equals the float64 reference backward for every operator in bfloat16'
      T1='CUDA chunked backward at T = 1 equals one step of the reference backward'
      PK='CUDA chunked backward of a packed batch of many short sequences equals the reference'
      DT='CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
      RG='CUDA chunked backward with ragged last chunks equals the reference for lengths around 64'
      Q16='CUDA v2 tensor-core chunked backward equals the float64 reference backward for every operator in bfloat16'
      SZ='CUDA chunked backward is exact at the tuned and the largest head sizes up to K = V = 256'
      V3='CUDA v3 chunked backward on the forward tensor-core kernels equals the float64 reference backward for every operator in bfloat16'
      V4='CUDA v4 tensor-core B7 and B9 chunked backward equals the float64 reference backward for every operator in bfloat16'
      # BMUT_ONLY=v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v14, v15, v16, v17 or v18 (or several, space-separated): those rungs'
      # mutants alone (BMUT_V3_ONLY=1 is BMUT_ONLY=v3). MUT_SAN=0 skips the groups' sanitizer runs on the
      # mutant tree (minutes each; run them on the real binaries instead).
      only=${BMUT_ONLY:-}; [ -n "${BMUT_V3_ONLY:-}" ] && only=v3
      grp() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }  # BMUT_ONLY may name several: "v11 v12 v14"
      run_m() { local n=$1; shift; for t in "$@"; do
          r=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261130 max_success=30" timeout 90 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1)
          echo "mutant $n | $t | ${r:-no summary (crash or timeout)}"; done; }
      {
        if grp old; then
        run_m 0 "$P32" "$PK" "$DT"
        run_m 5 "$PK" "$P32"
        run_m 11 "$P32" "$RG"
        run_m 12 "$P32" "$RG"
        run_m 13 "$P32" "$RG"
        run_m 14 "$P32" "$T1"
        run_m 15 "$DT" "$P32"
        run_m 16 "$P32" "$P16"
        run_m 0 "$Q16"
        run_m 21 "$Q16" "$RG"
        run_m 22 "$Q16" "$SZ"
        run_m 23 "$Q16" "$DT"
        run_m 24 "$Q16" "$RG"
        fi
        if grp v3; then
        run_m 0 "$V3"
        run_m 41 "$V3" "$RG"
        run_m 42 "$V3" "$T1"
        run_m 43 "$V3" "$DT"
        run_m 44 "$V3" "$RG"
        run_m 45 "$V3" "$RG"
        run_m 46 "$V3" "$RG"
        run_m 47 "$V3" "$SZ"
        run_m 48 "$V3" "$RG"
        run_m 49 "$V3" "$PK"
        echo "mutant 43 under compute-sanitizer racecheck, $T1:"
        LINATTN_MUTANT=43 timeout 120 compute-sanitizer --tool racecheck $M "$T1" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        fi
        if grp old; then
        echo "mutant 23 under compute-sanitizer racecheck, $T1:"
        LINATTN_MUTANT=23 timeout 120 compute-sanitizer --tool racecheck $M "$T1" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        echo "mutant 15 under compute-sanitizer racecheck, $T1:"
        LINATTN_MUTANT=15 timeout 120 compute-sanitizer --tool racecheck $M "$T1" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        fi
        if grp v4; then
        run_m 0 "$V4"
        run_m 51 "$V4" "$RG"
        run_m 52 "$V4" "$RG"
        run_m 53 "$V4" "$DT"
        run_m 54 "$V4" "$SZ"
        run_m 55 "$V4" "$RG"
        echo "mutant 53 under compute-sanitizer racecheck, $T1:"
        LINATTN_MUTANT=53 timeout 120 compute-sanitizer --tool racecheck $M "$T1" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        fi
        if grp v5; then
        V5='CUDA v5 chunked backward with the levels intra kernel in prepare equals the float64 reference backward for every operator in bfloat16'
        run_m 0 "$V5"
        run_m 56 "$V5" "$RG"
        run_m 57 "$V5" "$SZ"
        run_m 58 "$V5" "$RG"
        run_m 59 "$V5" "$T1"
        run_m 50 "$V5" "$PK"
        # rung 5 must run v4's intra kernel in prepare: v4's forward mutants 38 (tensor-core A) and 32
        # (a level of L, P dropped) must fail its property; 38 must not touch rung 4 (v3's intra kernel)
        run_m 38 "$V5"
        run_m 32 "$V5"
        run_m 38 "$V4"
        fi
        if grp v6; then
        V6='CUDA v6 chunked backward with the per-channel B9 by levels on tensor cores equals the float64 reference backward for every operator in bfloat16'
        EX='CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1'
        run_m 0 "$V6" "$EX"
        run_m 66 "$V6" "$RG"
        run_m 67 "$V6" "$RG"
        run_m 68 "$EX" "$V6"
        # rung 6 must not run the float32 B9: rung 5's mutant 58 (a pair dropped there) must pass it;
        # it shares rung 5's batched B9 staging for DeltaNet / GDN: mutant 59 must fail it
        run_m 58 "$V6"
        run_m 59 "$V6"
        echo "no mutant, compute-sanitizer racecheck (every rung, b9_levels' 13 barriers per slab included), $T1:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 120 compute-sanitizer --tool racecheck $M "$T1" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        fi
        if grp v7; then
        V7='CUDA v7 chunked backward with per-block row bases equals the float64 reference backward for every operator in bfloat16'
        BIT7='CUDA v7 chunked backward gives rung 6 gradients bit for bit'
        run_m 0 "$V7" "$BIT7"
        run_m 69 "$BIT7" "$V7"
        run_m 70 "$BIT7" "$V7"
        run_m 71 "$BIT7" "$V7"
        run_m 72 "$BIT7" "$V7"
        # rung 7 runs its own copies of the batched tail and the B9 k, q staging: rung 5's mutants 50
        # and 59 there break rung 6 alone, so they must fail BIT7 and pass V7; it shares b9_levels'
        # arithmetic with rung 6: mutant 66 (a level skipped) must fail V7 and pass BIT7.
        run_m 50 "$BIT7" "$V7"
        run_m 59 "$BIT7" "$V7"
        run_m 66 "$V7" "$BIT7"
        fi
        if grp v8; then
        V8='CUDA v8 chunked backward with full-width global accesses equals the float64 reference backward for every operator in bfloat16'
        BIT8='CUDA v8 chunked backward gives rung 7 gradients bit for bit'
        run_m 0 "$V8" "$BIT8"
        run_m 73 "$BIT8" "$V8"
        run_m 74 "$BIT8" "$V8"
        run_m 75 "$BIT8" "$V8"  # a reordered sum: BIT8 must fail; V8 may pass (within the bounds)
        run_m 76 "$BIT8" "$V8"
        run_m 77 "$BIT8" "$V8"
        run_m 78 "$BIT8" "$V8"
        run_m 79 "$BIT8" "$V8"
        run_m 85 "$BIT8" "$V8"  # rung 8's wide extras (prepare)
        run_m 86 "$BIT8" "$V8"  # its G quads (KDA, GDN2)
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 8's quads and pairs), $PK:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$BIT8" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v9; then
        V9='CUDA v9 chunked backward with G E Qg Kd formed in the grads kernel equals the float64 reference backward for every operator in bfloat16'
        BIT9='CUDA v9 chunked backward gives rung 8 gradients bit for bit'
        run_m 0 "$V9" "$BIT9"
        run_m 87 "$BIT9" "$V9"  # the tail's Kd quads
        run_m 88 "$BIT9" "$V9"  # E's quads without beta
        run_m 89 "$BIT9" "$V9"  # G's cumsum one row late
        run_m 90 "$BIT9" "$V9"  # (b)'s shared Kd one row late: dg alone
        run_m 91 "$BIT9" "$V9"  # the item tail's Qg without scale (K = 17, 18, 22)
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 9's G scratch and scan), $PK:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$BIT9" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v10; then
        V10='CUDA v10 split chunked backward equals the float64 reference backward for every operator in bfloat16'
        CL10='CUDA v10 split chunked backward is rung 8 up to float32 summation order'
        run_m 0 "$V10" "$CL10"
        run_m 98 "$CL10" "$V10"   # G2's dk without dk_part
        run_m 99 "$CL10" "$V10"   # G2's dL with A for A^T
        run_m 100 "$CL10" "$V10"  # G2's reverse cumsum one row off (GDN dg)
        run_m 101 "$CL10" "$V10"  # G2's du0 without A^T (dv: the bit part of CL10)
        run_m 102 "$CL10" "$V10"  # G1's dG_last not folded (GDN dg)
        run_m 103 "$CL10" "$V10"  # G1's dk_part without dk^P
        run_m 104 "$CL10" "$V10"  # G1's dG_part without q~ dq^P (GDN dg)
        run_m 105 "$CL10" "$V10"  # G2's dG without dE E (GDN dg)
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 10's G1 tail and G2), $PK and $CL10:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$CL10" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v11; then  # BMUT_ONLY=v11: rung 11's mutants alone
        V11='CUDA v11 fast WY chunked backward equals the float64 reference backward for every operator in bfloat16'
        BIT11='CUDA v11 gradients equal v10 gradients bit for bit'
        run_m 0 "$V11" "$BIT11"
        run_m 120 "$BIT11" "$V11"  # no dE on chip
        run_m 121 "$BIT11" "$V11"  # dbeta loses de k at lane + 32
        run_m 122 "$BIT11" "$V11"  # 16-byte v path swaps u0 columns (V % 8 == 0)
        run_m 123 "$BIT11" "$V11"  # k slab's last octet zero
        run_m 124 "$BIT11" "$V11"  # dk_part pair swapped
        run_m 125 "$BIT11" "$V11"  # dv odd columns
        run_m 126 "$BIT11" "$V11"  # dbeta: last K slab only (K > 64)
        run_m 127 "$BIT11" "$V11"  # dbeta: du0 v of one row in four
        run_m 128 "$BIT11" "$V11"  # GDN dG without dE E
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 11's G2), $BIT11:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 200 compute-sanitizer --tool racecheck $M "$BIT11" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$BIT11" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v12; then
        V12='CUDA v12 slab G1 chunked backward equals the float64 reference backward for every operator in bfloat16'
        BIT12='CUDA v12 gradients equal v10 gradients bit for bit'
        run_m 0 "$V12" "$BIT12"
        run_m 140 "$BIT12" "$V12"  # G1's dk_part without dk^P
        run_m 141 "$BIT12" "$V12"  # G1's dG_last not folded (GDN dg)
        run_m 142 "$BIT12" "$V12"  # dP over the first value slab only (V > 64)
        run_m 143 "$BIT12" "$V12"  # k, q slabs one channel short
        run_m 144 "$BIT12" "$V12"  # dw_aux without its sign
        run_m 145 "$BIT12" "$V12"  # every block on the first slab (K > 64)
        run_m 146 "$BIT12" "$V12"  # dgamma's second half row lost (GDN dg)
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 12's G1), $BIT12:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 200 compute-sanitizer --tool racecheck $M "$BIT12" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$BIT12" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v14; then  # BMUT_ONLY=v14: rung 14's mutants alone (KDA and GDN2's G1 and G2)
        V14='CUDA v14 per-channel split chunked backward equals the float64 reference backward for every operator in bfloat16'
        CL14='CUDA v14 per-channel split backward is rung 8 up to float32 summation order for KDA and GDN2'
        SG14='CUDA v14 slab G1 gives the one-block G1 gradients bit for bit for KDA and GDN2'
        run_m 0 "$V14" "$CL14"
        run_m 150 "$CL14" "$V14"  # G1': Z's left rows k F instead of q~ F (dk^P)
        run_m 151 "$CL14" "$V14"  # G1': dq^P without its diagonal term on even channels
        run_m 152 "$CL14" "$V14"  # G1': P half without level 1
        run_m 153 "$CL14" "$V14"  # G2: X's left rows k F instead of e F (dk^L)
        run_m 154 "$CL14" "$V14"  # G2: de without dE exp(G)
        run_m 155 "$CL14" "$V14"  # G2: dG without e de^L (dg)
        run_m 156 "$CL14" "$V14"  # G2: dg's reverse sum without the last row
        run_m 157 "$CL14" "$V14"  # G2, GDN2: dw = du0 w
        run_m 158 "$CL14" "$V14"  # G2, KDA: dbeta without <du0, v>
        run_m 159 "$SG14" "$CL14"  # one-block G1: P half without level 1 (only the hook test sees it)
        run_m 160 "$CL14" "$SG14"  # G1': dKd parked as dQg
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 14's G1' and G2), $CL14:"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 200 compute-sanitizer --tool racecheck $M "$CL14" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 timeout 150 compute-sanitizer --tool memcheck $M "$CL14" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v15; then  # BMUT_ONLY=v15: rung 15's mutants alone (the kHi instantiations: G1', G2', rung 8's kernel)
        V15='CUDA v15 and v16 chunked backward equal the float64 reference backward at odd and extreme head sizes and on many short sequences'  # rung 15's properties were removed (session 10: they fail rung 3's bounds)
        FX15='CUDA v15 hi-only products keep every gradient within rung 3 bounds beside rungs 13 and 8 on fixed cases'
        run_m 0 "$V15" "$FX15"
        run_m 170 "$FX15" "$V15"  # G1' hi: dKd product left out
        run_m 171 "$FX15" "$V15"  # G1' hi: dQg reads dS' instead of S
        run_m 172 "$FX15" "$V15"  # G1' hi: quad staging puts v_new in the dv_new tile
        run_m 173 "$FX15" "$V15"  # G1' hi: dk^P from k instead of q
        run_m 174 "$FX15" "$V15"  # G2' hi: Y tile on the k slab's tile
        run_m 175 "$FX15" "$V15"  # G2' hi: dL product left out
        run_m 176 "$FX15" "$V15"  # G2' hi: dE buffer one tile early (over the k slab)
        run_m 177 "$FX15" "$V15"  # G2' hi: u0 column quads swapped (16-byte v path)
        run_m 178 "$FX15" "$V15"  # G1' hi: M2 without its diagonal
        run_m 179 "$FX15" "$V15"  # KDA / GDN2 hi: B9 levels without de^L's products
        run_m 180 "$FX15" "$V15"  # KDA / GDN2 hi: dE = A^T E
        run_m 181 "$FX15" "$V15"  # KDA / GDN2 hi: T1 product left out
        run_m 182 "$FX15" "$V15"  # KDA / GDN2 hi: Y_s left rows zero
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 15's hi-only kernels), $V15 (max_success=3):"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 200 compute-sanitizer --tool racecheck $M "$V15" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 150 compute-sanitizer --tool memcheck $M "$V15" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v16; then  # BMUT_ONLY=v16: rung 16's mutants alone (KDA and GDN2's G1s, G2s and B9 kernel)
        V16='CUDA v16 one B9 kernel chunked backward equals the float64 reference backward for every operator in bfloat16'
        CL16='CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order for KDA and GDN2'
        run_m 0 "$V16" "$CL16"
        run_m 190 "$CL16" "$V16"  # G1s: the hand-over's dP is dQg
        run_m 191 "$CL16" "$V16"  # G1s: dk_part without exp(G_last - G)
        run_m 192 "$CL16" "$V16"  # G1s: dG_last without dgamma exp(G_last)
        run_m 193 "$CL16" "$V16"  # B9: A^T T1 read from dP's place
        run_m 194 "$CL16" "$V16"  # B9: de without de^L
        run_m 195 "$CL16" "$V16"  # B9: dk without (beta | b) de
        run_m 196 "$CL16" "$V16"  # B9: dG without q~ dq^P
        run_m 197 "$CL16" "$V16"  # B9: dq without exp(G)
        run_m 198 "$CL16" "$V16"  # B9: dg's reverse sum without the last row
        run_m 199 "$CL16" "$V16"  # B9, KDA: dbeta without <du0, v>
        run_m 200 "$CL16" "$V16"  # G2s, GDN2: dw = du0 w
        run_m 201 "$CL16" "$V16"  # B9, KDA: beta staged as 0
        run_m 202 "$CL16" "$V16"  # B9, KDA: dbeta's <du0, v> at a wrong row stride
        run_m 203 "$CL16" "$V16"  # G2s: u0 staged as 0
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 16's G1s, G2s, B9 kernel), $V16 (max_success=3):"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 200 compute-sanitizer --tool racecheck $M "$V16" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 150 compute-sanitizer --tool memcheck $M "$V16" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v17; then  # BMUT_ONLY=v17: rung 17's mutants alone (the lo operands it keeps, its tile layouts)
        V17='CUDA v17 hybrid products chunked backward equals the float64 reference backward for every operator in bfloat16'
        FX17='CUDA v17 hybrid products keep every gradient within rung 3 bounds on rung 15 failing cases and fixed cases'
        run_m 0 "$V17" "$FX17"
        run_m 210 "$FX17" "$V17"  # G1': dP without v_new's lo (the model: dk 1.5-1.9x its bound on the fixed cases)
        run_m 211 "$FX17" "$V17"  # G2': du0 without dv_new's lo (the model: dbeta 3-4x on seeds 537651 and 121)
        run_m 212 "$FX17" "$V17"  # G2': X's lo tile on Y hi
        run_m 213 "$FX17" "$V17"  # G1': v_new's lo tile on dS' hi
        run_m 214 "$FX17" "$V17"  # G2': X's lo tile on A hi
        run_m 215 "$FX17" "$V17"  # KDA / GDN2 (V17Mid): dP without v_new's lo
        run_m 216 "$FX17" "$V17"  # KDA / GDN2 (V17Mid): du0 without dv_new's lo
        echo "no mutant, compute-sanitizer racecheck and memcheck (rung 17's G1', G2' and V17Mid kernel), $V17 (max_success=3):"
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 200 compute-sanitizer --tool racecheck $M "$V17" 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | sort | uniq -c | head -5
        [ "${MUT_SAN:-1}" = 1 ] && LINATTN_MUTANT=0 RC_PARAMS="seed=20261130 max_success=3" timeout 150 compute-sanitizer --tool memcheck $M "$V17" 2>&1 | grep -E "ERROR SUMMARY" | head -2
        fi
        if grp v18; then  # BMUT_ONLY=v18: rung 18's mutants alone (E, Qg, Kd and GDN's G formed without the extras kernel)
        B18='CUDA v18 gradients equal v17 gradients bit for bit'
        run_m 0 "$B18"
        run_m 240 "$B18"  # G2': B6's E slab without exp(G_i) (GDN)
        run_m 241 "$B18"  # G2': B6's E slab with row i + 1's beta
        run_m 242 "$B18"  # G1': GDN's Kd with exp(G_i) instead of exp(G_last - G_i)
        run_m 243 "$B18"  # bwd18_gcum: the sum starts at row 1
        run_m 244 "$B18"  # G2': B10's GDN E without exp(G_r)
        fi
      } 2>&1 | tee "$OUT/bmutants.log" ;;
    smutants)
      # The saved forward's planted bugs (make_mutants.py 95-97; chunk_cuda.hpp, SavedForward) against
      # test_cuda_saved (built in the mutant tree: --target test_cuda_saved): each must fail SV (bit for
      # bit with the recompute path) and SP (the reference property); 110-112 (stream order, refusal)
      # their own test; mutant 0 must pass all six.
      M=${MBIN:-build/mutants}/test_cuda_saved
      SV='CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
      SP='CUDA saved backward after a saving forward equals the float64 reference backward within the rung 3 bounds'
      S2='CUDA saved backward can be run twice from one saved forward with the same gradients'
      SR='CUDA saved backward refuses other sequences or another q or v buffer or another B H K V with a linattn Error naming what differs'
      SS1='CUDA saved backward on another stream waits for the saving forward without a synchronisation'
      SS2='CUDA refill of a SavedForward on another stream waits for the backward that still reads it'
      SD='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
      SN='CUDA saving forward with states but no SavedForward is a linattn Error naming save'
      SB='CUDA saving forward with states stores every state and v_new at value tiles of 16 and 32 and 64 columns'
      SH='CUDA saved backward with states refuses another initial state and without states accepts it'
      run_s() { local n=$1; shift; for t in "$@"; do
          r=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261130 max_success=30" timeout 90 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1)
          echo "mutant $n | $t | ${r:-no summary (crash or timeout)}"; done; }
      {
        run_s 0 "$SV" "$SP" "$S2" "$SR" "$SS1" "$SS2"
        run_s 95 "$SV" "$SP"  # the saving forward does not write A
        run_s 96 "$SV" "$S2"  # the saved backward reads its own (poisoned) tc region
        run_s 97 "$SV" "$SP"  # A read one row late
        run_s 110 "$SS1"      # the backward does not wait for the saving forward's event
        run_s 111 "$SS2"      # a refill does not wait for the backward's event
        run_s 112 "$SR"       # cu_seqlens' content not compared
        run_s 0 "$SD" "$SN" "$SB" "$SH"  # saved states (make_mutants.py 220-224): 220-223 must fail SD
        for n in 220 221 222 223; do run_s $n "$SD"; done
        run_s 220 "$SB"; run_s 221 "$SB"  # ... and SB (every tile width)
        run_s 224 "$SH"      # the initial_state pointer not compared with states
      } 2>&1 | tee "$OUT/smutants.log" ;;
    bbench)
      echo "=== backward bench"
      timeout ${BBENCH_TIMEOUT:-330} python3 optimized/cuda/bench/bench_backward.py --lib $LIB --fla .fla --json "$OUT/bbench.json" ${BBENCH_ARGS:-} 2>&1 | tee "$OUT/bbench.log" | grep -v "^\s*$"
      tar -czf "$OUT/triton_cache.tgz" -C /tmp/triton_cache . 2>/dev/null ;;
    bench)
      echo "=== bench"
      timeout ${BENCH_TIMEOUT:-420} python3 optimized/cuda/bench/bench_forward.py --lib $LIB --fla .fla --json "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | grep -v "^\s*$"
      tar -czf "$OUT/triton_cache.tgz" -C /tmp/triton_cache . 2>/dev/null ;;
  esac
done
