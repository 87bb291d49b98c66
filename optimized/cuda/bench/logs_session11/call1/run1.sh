#!/usr/bin/env bash
# Session 11 call 1 (carry .cudabin; binaries built at 57141bc, the HEAD: .cudabin/BUILT_AT):
# session 10's pending list -- the saving forward with states, then forward rung 7 (pending_device_run.sh).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash optimized/cuda/bench/pending_device_run.sh; rc=$?
echo "pending rc $rc"
