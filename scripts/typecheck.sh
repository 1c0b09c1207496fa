#!/usr/bin/env bash
# Type-check the package as it is installed: the card's folders (envs/, judges/, ...) are subpackages of
# commitbench only once installed, so mypy reads a throwaway install, not the source tree. The install is
# built from a copy of the checkout's files (tracked, and untracked but not ignored), so that a stale build/
# folder cannot add modules the source no longer has. Everything it writes is removed on every exit, mypy's
# failure included.
set -euo pipefail
cd "$(dirname "$0")/.."
target=".typecheck"
source_copy="$(mktemp -d)"
log="$(mktemp)"
trap 'rm -rf "$target" "$source_copy" "$log"' EXIT
rm -rf "$target"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
    [[ -e "$path" ]] && printf '%s\0' "$path"
done | tar --null -T - -cf - | tar -xf - -C "$source_copy"
python -m pip install -q --no-deps --no-compile --target "$target" "$source_copy" 2>"$log" || { cat "$log"; exit 1; }
cp pyproject.toml "$target/"
(cd "$target" && python -m mypy -p commitbench)
