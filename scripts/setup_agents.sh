#!/usr/bin/env bash
# The agent CLIs of tests/serve/test_app_agent_clis.py, from npm at pinned versions: Claude
# Code and Codex CLI. Each npm package wraps a native binary of the platform, shipped as an
# optional dependency: Claude Code's (@anthropic-ai/claude-code-linux-x64, a 400 MB ELF) is
# put in place of bin/claude.exe by its postinstall and runs without Node; Codex's
# (@openai/codex@<version>-linux-x64: a static musl codex, its code-mode host, ripgrep) is
# started by the Node launcher bin/codex.js. Claude Code's package declares node >= 22; its
# postinstall runs on older Node, hence --engine-strict=false. Neither needs the network to
# run: the tests keep both offline.
#
# Cached outside the clone, keyed by the pinned versions: a later run exits at once.
# Env: AUTOPARSER_AGENTS_DIR (default ~/.cache/autoparser/agents), NPM (default npm).
# The tests find the binaries in $AUTOPARSER_AGENTS_DIR/node_modules/.bin.
set -euo pipefail
CLAUDE_CODE=2.1.332
CODEX=0.171.0
DIR=${AUTOPARSER_AGENTS_DIR:-$HOME/.cache/autoparser/agents}
STAMP="$DIR/.autoparser-stamp"
WANT="@anthropic-ai/claude-code@$CLAUDE_CODE @openai/codex@$CODEX"
if [ -x "$DIR/node_modules/.bin/claude" ] && [ -x "$DIR/node_modules/.bin/codex" ] \
    && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
    echo "agents: cached in $DIR ($WANT)"
    exit 0
fi
rm -rf "$DIR"
mkdir -p "$DIR"
cat >"$DIR/package.json" <<JSON
{
  "private": true,
  "dependencies": {
    "@anthropic-ai/claude-code": "$CLAUDE_CODE",
    "@openai/codex": "$CODEX"
  }
}
JSON
"${NPM:-npm}" install --prefix "$DIR" --no-audit --no-fund --engine-strict=false --loglevel=error
# An npm that holds back install scripts leaves Claude Code's placeholder: run its postinstall.
if ! "$DIR/node_modules/.bin/claude" --version >/dev/null 2>&1; then
    (cd "$DIR/node_modules/@anthropic-ai/claude-code" && node install.cjs)
fi
# Both must run here (no network needed to print a version).
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
echo "$WANT" >"$STAMP"
echo "agents: installed $WANT in $DIR ($(du -sh "$DIR" | cut -f1))"
