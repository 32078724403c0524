#!/usr/bin/env bash
# The built wheel as a user gets it (`make wheel-demo`, CI): a fresh venv in a temporary
# directory outside the repository, the wheel and its dependencies from the index, and then
#   - claimgraph and its native module are the venv's (nothing imported from a checkout),
#   - `claimgraph --version` says the native core is loaded and not stale,
#   - `claimgraph demo` and `claimgraph demo --scenario refunds` run there, on that core.
# Usage: tools/wheel_demo.sh dist/claimgraph-*.whl   (PYTHON: the interpreter, default python3)
set -euo pipefail
[ "$#" -eq 1 ] || { echo "usage: $0 WHEEL" >&2; exit 2; }
wheel="$(realpath "$1")"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/claimgraph-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
unset PYTHONPATH CLAIMGRAPH_PURE
start=$SECONDS
"$python" -m venv venv
venv/bin/python -m pip install --quiet --disable-pip-version-check "$wheel"
echo "wheel-demo: $(basename "$wheel") installed into a fresh venv in $((SECONDS - start))s"
venv/bin/python - <<'EOF'
import sys
from pathlib import Path

import claimgraph
from claimgraph import native

prefix = Path(sys.prefix).resolve()
files = {"claimgraph": claimgraph.__file__, "native": getattr(native.module, "__file__", None)}
for name, file in files.items():
    assert file is not None and prefix in Path(file).resolve().parents, (name, file, prefix)
EOF
venv/bin/claimgraph --version | tee version.txt
grep -q '^core: native ' version.txt || { echo "wheel-demo: the native core is not loaded" >&2; exit 1; }
if grep -q 'stale' version.txt; then echo "wheel-demo: the native build is stale" >&2; exit 1; fi
for scenario in inventory refunds; do
  venv/bin/claimgraph demo --scenario "$scenario" --into "demo-$scenario" > "$scenario.txt"
  grep -q 'reproduced every decision byte for byte' "$scenario.txt" \
    || { cat "$scenario.txt"; echo "wheel-demo: the $scenario demo did not verify" >&2; exit 1; }
  echo "wheel-demo: claimgraph demo --scenario $scenario ran ($(wc -l < "$scenario.txt") lines)"
done
echo "wheel-demo: ok in $((SECONDS - start))s"
