#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Checks that the C++ and CUDA files differ in nothing from .clang-format's output. With no argument
# it checks the files changed since BASE (default: the last commit that is not the work in hand,
# HEAD~1) plus uncommitted ones; with --all, every tracked file. The version is pinned (Debian 12's
# clang-format-14): another version formats some constructs differently.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=clang-format-14
if ! command -v "$formatter" >/dev/null; then
  echo "check_format: $formatter is missing (tools/setup.sh installs it)" >&2
  exit 2
fi
pattern='\.(cpp|hpp|cu|cuh|h|cc)$'
if [ "${1:-}" = "--all" ]; then
  files=$(git ls-files | grep -E "$pattern" || true)
else
  base="${1:-HEAD~1}"
  git rev-parse -q --verify "$base^{commit}" >/dev/null || base=$(git rev-list --max-parents=0 HEAD)
  files=$( { git diff --name-only --diff-filter=d "$base"; git ls-files --others --exclude-standard; } \
             | grep -E "$pattern" | sort -u || true)
fi
[ -z "$files" ] && { echo "check_format: no C++ files to check"; exit 0; }
bad=0
for f in $files; do
  [ -f "$f" ] || continue
  if ! "$formatter" --dry-run --Werror "$f" 2>/dev/null; then
    echo "check_format: $f is not formatted; run: $formatter -i $f" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "check_format: $(echo "$files" | wc -w) files formatted as .clang-format says"
exit "$bad"
