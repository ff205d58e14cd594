#!/usr/bin/env bash
# A virtual environment with the real SGLang package, CPU only, for the SGLang plug-in tests
# (tests/integrations/test_adapter_contract.py runs tests/helpers/sglang_driver.py in it).
#
# The plug-in tests only import SGLang's function-call and reasoning parser modules (and its
# plug-in loader): the wheel --no-deps next to scripts/sglang-requirements.txt, CPU torch.
# Cached (scripts/engine_venv.sh). Env: SGLANG_VENV (default ~/.cache/autoparser/sglang-venv),
# PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/engine_venv.sh
engine_venv sglang "${SGLANG_VENV:-$HOME/.cache/autoparser/sglang-venv}" \
    scripts/sglang-requirements.txt <<'PY'
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: F401
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: F401
from sglang.srt.plugins import load_plugins  # noqa: F401
PY
