#!/usr/bin/env bash
# A virtual environment with the real vLLM package, CPU only, for the vLLM plugin tests
# (tests/integrations/vllm/test_parsers.py runs tests/helpers/vllm_driver.py in it).
#
# The plugin tests only import vLLM's parser managers, its OpenAI protocol classes and the
# parser composition (vllm.parser): the wheel --no-deps next to scripts/vllm-requirements.txt,
# CPU torch. Cached (scripts/engine_venv.sh). Env: VLLM_VENV (default
# ~/.cache/autoparser/vllm-venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/engine_venv.sh
engine_venv vllm "${VLLM_VENV:-$HOME/.cache/autoparser/vllm-venv}" \
    scripts/vllm-requirements.txt <<'PY'
import vllm.parser.parser_manager  # noqa: F401  (the imports the plugin tests need)
from vllm.reasoning import ReasoningParserManager  # noqa: F401
from vllm.tool_parsers import ToolParserManager  # noqa: F401
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar  # noqa: F401
PY
