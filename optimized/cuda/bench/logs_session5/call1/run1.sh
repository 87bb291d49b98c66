#!/usr/bin/env bash
# Session 5 device call 1: every forward and backward test (binaries of HEAD, packed in bins.tar.xz).
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
BIN=/tmp/b bash optimized/cuda/bench/device_run.sh tests btests 2>&1 | tail -80
