#!/bin/sh
# The main job, offline, on the example template autoparser ships:
# what the template supports, how it writes reasoning and tool calls (found by diffing
# renders), the prompt, the grammar for a request with tools, and a model output parsed
# whole and streamed as OpenAI deltas.
set -eu
EXAMPLES="$(dirname "$0")/../src/autoparser/examples"
T="$EXAMPLES/chatml_tools.jinja"

echo "== autoparser caps";    autoparser caps "$T"
echo; echo "== autoparser analyze"; autoparser analyze "$T"
echo; echo "== autoparser render"
autoparser render "$T" --messages "$EXAMPLES/conversation.json" --tools "$EXAMPLES/tools.json"
echo; echo "== autoparser grammar"; autoparser grammar "$T" --tools "$EXAMPLES/tools.json"
echo; echo "== model output"; cat "$EXAMPLES/model_output.txt"; echo
echo; echo "== autoparser parse"
autoparser parse "$T" --tools "$EXAMPLES/tools.json" < "$EXAMPLES/model_output.txt"
echo; echo "== autoparser parse --stream"
autoparser parse "$T" --tools "$EXAMPLES/tools.json" --stream < "$EXAMPLES/model_output.txt"
