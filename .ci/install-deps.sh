#!/usr/bin/env bash
# .ci/install-deps.sh -- install what linattn needs on a fresh Debian machine; idempotent and
# silent when everything is already present. Called by ./run.sh before every build.
set -euo pipefail

# Debian packages (Debian 12, bookworm: its catch2 is v2, which the tests use): compiler, CMake, the test frameworks
# (Catch2 v2, RapidCheck), Doxygen (the API reference; test docs_build_without_warnings); Python 3 with pip and its
# headers (the bindings) unless a python3 with pip is already on PATH (e.g. a pyenv one).
DEB_PACKAGES=(g++ cmake make catch2 librapidcheck-dev doxygen)
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
  DEB_PACKAGES+=(python3 python3-pip python3-dev)
elif ! python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
  DEB_PACKAGES+=(python3-dev)  # a python3 with pip but without its headers: Debian's own
fi
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install-deps] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python packages: numpy (the bindings), pytest + hypothesis (Python tests and the harness),
# nbclient/nbformat/ipykernel (the notebooks run in CI), matplotlib (walkthroughs/plot_results.py and
# notebook 05's plots), ml_dtypes (NumPy's bfloat16: the harness tests check that bf16 arrays get the 16-bit
# tolerance). pybind11 and scikit-build-core are fetched by pip's build isolation when the module is installed.
PY_PACKAGES=(numpy pytest hypothesis nbclient nbformat ipykernel matplotlib ml_dtypes)
if ((${#PY_PACKAGES[@]})); then
  py_missing=()
  for p in "${PY_PACKAGES[@]}"; do
    python3 -c "import importlib.metadata as m; m.version('${p%%[<>=]*}')" 2>/dev/null || py_missing+=("$p")
  done
  if ((${#py_missing[@]})); then
    echo "[install-deps] installing Python packages: ${py_missing[*]}"
    bash "$(dirname "$0")/pip-install.sh" "${py_missing[@]}"
  fi
fi
