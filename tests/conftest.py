"""pytest configuration: the round-trip summary table plugin (tests/helpers/roundtrip_report.py).

Shared paths and corpus parameters live in ``helpers.paths``; test modules import them
from there, never from this file.
"""

pytest_plugins = ["helpers.roundtrip_report", "helpers.parity", "helpers.cpu_hog"]
