#!/usr/bin/env bash
# Headless browser for tests/studio/test_app_browser.py: Debian's chromium and its matching
# chromedriver (selenium is pointed at /usr/bin/chromedriver; it never downloads a driver).
# Idempotent: does nothing when both are already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
