#!/usr/bin/env bash
# Regenerate docs/studio.png, the README's picture of the studio, with the browser test
# (tests/studio/test_app_browser.py::test_screenshot) in Debian's headless chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_browser.sh
STUDIO_SCREENSHOT="$PWD/docs/studio.png" PYTHONPATH="$PWD/src" \
  python -m pytest -q tests/studio/test_app_browser.py -k test_screenshot
