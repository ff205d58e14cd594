#!/usr/bin/env bash
# A virtual environment with the real vLLM package, CPU only, for the vLLM plugin tests
# (tests/integrations/vllm/test_parsers.py runs tests/helpers/vllm_driver.py in it).
#
# vLLM's full requirements pull CUDA torch and GPU kernels (gigabytes); the plugin tests only
# import vLLM's parser managers, its OpenAI protocol classes and the parser composition
# (vllm.parser), so the wheel is installed with --no-deps next to the pinned list of what those
# imports need (scripts/vllm-requirements.txt), with the CPU torch wheel the machine provides.
#
# Cached outside the clone: a later run whose requirements did not change exits at once.
# Env: VLLM_VENV (default ~/.cache/autoparser/vllm-venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-$HOME/.cache/autoparser/vllm-venv}
REQS=scripts/vllm-requirements.txt
STAMP="$VENV/.autoparser-stamp"
WANT=$(sha256sum "$REQS" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
    echo "vllm: cached environment in $VENV ($(grep '^vllm==' "$REQS"))"
    exit 0
fi
rm -rf "$VENV"
"${PYTHON:-python3}" -m venv "$VENV"
# (pip's notes about the machine's unused local index folders are left out of the log)
"$VENV/bin/python" -m pip install --quiet --no-deps -r "$REQS" 2>&1 | { grep -v "is ignored" || true; }
"$VENV/bin/python" - <<'EOF'
import vllm.parser.parser_manager  # noqa: F401  (the imports the plugin tests need)
from vllm.reasoning import ReasoningParserManager  # noqa: F401
from vllm.tool_parsers import ToolParserManager  # noqa: F401
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar  # noqa: F401
EOF
echo "$WANT" >"$STAMP"
echo "vllm: installed $(grep '^vllm==' "$REQS") in $VENV"
