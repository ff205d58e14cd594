"""pytest configuration: the round-trip summary table plugin (tests/helpers/roundtrip_report.py).

Shared paths and corpus parameters live in ``helpers.paths``; test modules import them
from there, never from this file.
"""

import os

pytest_plugins = ["helpers.roundtrip_report", "helpers.parity", "helpers.cpu_hog"]

# Tests never write to the user's analysis cache (the CLI and serve save analyses there by
# default); tests of the saved analysis pass their own directory.
os.environ.setdefault("AUTOPARSER_ANALYSIS_CACHE", "off")
