#!/usr/bin/env bash
# The agent CLIs of tests/serve/test_app_agent_clis.py, from npm at pinned versions: Claude
# Code and Codex CLI. Both npm packages only wrap a native binary of the platform (an optional
# dependency: @anthropic-ai/claude-code-linux-x64, @openai/codex@<version>-linux-x64), so
# neither needs Node at run time; Claude Code's package declares node >= 22 but its
# postinstall (which puts the binary in place) runs on older Node, hence --engine-strict=false.
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
# Both must run here (no network needed to print a version).
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
echo "$WANT" >"$STAMP"
echo "agents: installed $WANT in $DIR ($(du -sh "$DIR" | cut -f1))"
