#!/usr/bin/env bash
# Session 9, device call 1: what session 8 wrote after its last device call (rungs 11, 12, 13, the
# saved forward's review fixes), via bench/pending_device_run.sh. Binaries built here at 24b5662
# (.cudabin/BUILT_AT). Carry: .cudabin .tcache.
bash optimized/cuda/bench/pending_device_run.sh
