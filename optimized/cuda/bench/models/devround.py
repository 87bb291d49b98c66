"""optimized/cuda/bench/models/devround.py -- the device's rounding, emulated in numpy for the float64
models of the CUDA rungs: bf16 round-to-nearest-even (as __float2bfloat16_rn) and the hi + lo split of a
float32 value into two bf16 values (put_split / split2 in the CUDA code: hi = bf16(x), lo = bf16(x - hi))."""
import numpy as np


def bf16(x):
    """Round float32 values to bf16 (nearest even), returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def split(x):
    """hi + lo bf16 split of float32(x): (hi, lo) as float64."""
    x32 = np.asarray(x, dtype=np.float32)
    hi = bf16(x32)
    return hi, bf16(x32.astype(np.float64) - hi)
