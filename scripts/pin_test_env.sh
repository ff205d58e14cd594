#!/usr/bin/env bash
# Re-pin the test and tool environment on purpose (constraints.txt).
#
# CI and the README's test command install with `-c constraints.txt`, so every package of the
# test environment -- the oracles (transformers, llguidance, xgrammar, jsonschema, hypothesis,
# hypothesis-jsonschema, the official openai/anthropic clients, selenium ...) and the tools
# (pytest, ruff, mypy) -- is the exact version last tested. A release elsewhere cannot turn
# main red; a bump is this command, a full test run, and a commit of the new constraints.txt.
#
# Usage:  scripts/pin_test_env.sh            resolve the newest versions the project allows
#         scripts/pin_test_env.sh --freeze   pin what the active virtual environment has now
# The vLLM environment is pinned apart, in scripts/vllm-requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=constraints.txt
HEADER="# Exact versions of the test and tool environment (installed with -c constraints.txt).
# Regenerate on purpose with scripts/pin_test_env.sh, run the full suite, commit."
freeze() { "$1" -m pip freeze --exclude-editable | grep -v '^autoparser' | LC_ALL=C sort -f; }
if [ "${1:-}" = "--freeze" ]; then
    { echo "$HEADER"; freeze python; } >"$OUT"
else
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    python3 -m venv "$TMP/venv"
    "$TMP/venv/bin/python" -m pip install --quiet --upgrade pip
    "$TMP/venv/bin/python" -m pip install --quiet -e ".[test,dev,train]"
    # xgrammar without its torch/triton requirements (only its EBNF parser is used).
    "$TMP/venv/bin/python" -m pip install --quiet --no-deps xgrammar apache-tvm-ffi
    { echo "$HEADER"; freeze "$TMP/venv/bin/python"; } >"$OUT"
fi
echo "wrote $OUT ($(grep -vc '^#' "$OUT") pins); now run the full suite and commit it"
