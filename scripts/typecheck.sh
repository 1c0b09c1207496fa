#!/usr/bin/env bash
# Type-check the package as it is installed: the card's folders (envs/, judges/, ...) are subpackages of
# commitbench only once installed, so mypy reads a throwaway install, not the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
target=".typecheck"
rm -rf "$target"
log="$(mktemp)"
python -m pip install -q --no-deps --no-compile --target "$target" . 2>"$log" || { cat "$log"; rm -f "$log"; exit 1; }
rm -f "$log"
cp pyproject.toml "$target/"
(cd "$target" && python -m mypy -p commitbench)
rm -rf "$target"
