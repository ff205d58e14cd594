#!/usr/bin/env bash
# A virtual environment with the real SGLang package, CPU only, for the SGLang plug-in tests
# (tests/integrations/test_adapter_contract.py runs tests/helpers/sglang_driver.py in it).
#
# SGLang's full requirements pull CUDA torch, FlashInfer and GPU kernels (gigabytes, and no CPU
# build); the plug-in tests only import SGLang's function-call and reasoning parser modules
# (and its plug-in loader), so the wheel is installed with --no-deps next to the pinned list of
# what those imports need (scripts/sglang-requirements.txt), with the CPU torch wheel.
#
# Cached outside the clone: a later run whose requirements did not change exits at once.
# Env: SGLANG_VENV (default ~/.cache/autoparser/sglang-venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SGLANG_VENV:-$HOME/.cache/autoparser/sglang-venv}
REQS=scripts/sglang-requirements.txt
STAMP="$VENV/.autoparser-stamp"
WANT=$(sha256sum "$REQS" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
    echo "sglang: cached environment in $VENV ($(grep '^sglang==' "$REQS"))"
    exit 0
fi
rm -rf "$VENV"
"${PYTHON:-python3}" -m venv "$VENV"
# (pip's notes about the machine's unused local index folders are left out of the log)
"$VENV/bin/python" -m pip install --quiet --no-deps -r "$REQS" 2>&1 | { grep -v "is ignored" || true; }
"$VENV/bin/python" - <<'PY'
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: F401
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: F401
from sglang.srt.plugins import load_plugins  # noqa: F401
PY
echo "$WANT" >"$STAMP"
echo "sglang: installed $(grep '^sglang==' "$REQS") in $VENV"
