#!/usr/bin/env bash
# Session 15 call 7: the Python module's CUDA tests (notebooks_bindings/tests/test_cuda.py, linattn.cuda) on the
# H200, last run there on 2026-11-30; since then rungs 5-10 and backward rungs 3-18 got Python tests that never
# ran on a GPU. The wheel was built on the project's 2-core machine from HEAD's tree with Python 3.12.1
# (cp312, as the device's 3.12.3): LINATTN_PY_CUDA=ON python3.12 -m pip wheel --no-deps ./notebooks_bindings;
# carried in .cudabin/wheel.tar.xz and installed with --no-deps into /tmp/pylib (NumPy, pytest, hypothesis: the
# device's). Bounded to 200 s.
set -u
OUT=${OUT:-/tmp/out}; END=200
source optimized/cuda/bench/call_lib.sh
mkdir -p /tmp/wh && tar -xJf .cudabin/wheel.tar.xz -C /tmp/wh
python3 -m pip install -q --no-deps --no-index --target /tmp/pylib /tmp/wh/*.whl > /tmp/l/pip.log 2>&1
note "pip install of the wheel rc $?"
python3 -c "import numpy, sys; print('python', sys.version.split()[0], 'numpy', numpy.__version__)" >> /tmp/l/env.log 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv >> /tmp/l/env.log
PYTHONPATH=/tmp/pylib timeout $(left 170) python3 -m pytest -v -p no:cacheprovider notebooks_bindings/tests/test_cuda.py \
  > /tmp/l/test_cuda_py.log 2>&1
note "pytest notebooks_bindings/tests/test_cuda.py rc $?: $(tail -1 /tmp/l/test_cuda_py.log)"
finish
