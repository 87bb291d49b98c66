#!/usr/bin/env bash
# .ci/pip-install.sh ARGS... -- `python3 -m pip install ARGS` as the project's scripts need it: quiet, no warning for
# root, and on a Python that its distribution marks as externally managed (PEP 668: Debian 12's /usr/bin/python3)
# with --break-system-packages, since the scripts install into the Python that runs the tests. Used by
# .ci/install-deps.sh and run.sh.
set -euo pipefail
flags=(-q --root-user-action=ignore)
if python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  flags+=(--break-system-packages)
fi
exec python3 -m pip install "${flags[@]}" "$@"
