#!/usr/bin/env bash
# Session 17 call 6 (the warm machine of call 5, its /tmp/b still unpacked; the command as run):
# the forward benchmark of DeltaNet and GDN at B=1 T=32768 with the cluster state kernel, best and fla, 3 rounds.
mkdir -p $OUT; (timeout 140 python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --versions 0 --ops delta_rule,gated_delta_rule --shapes 1x32768x16x128x128 --rep 40 --rounds 3 > $OUT/fbench_b1.log 2>&1; echo rc $? >> $OUT/fbench_b1.log); grep -E "rounds|rc " $OUT/fbench_b1.log
