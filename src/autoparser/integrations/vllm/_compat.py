"""The vLLM names the plugin uses, imported in one place, with the tested version range.

vLLM moves its parser classes and OpenAI protocol models between releases; outside the
tested range the plugin stops with an :class:`IntegrationError` naming the version, rather
than failing later inside a request. ``AUTOPARSER_VLLM_ANY_VERSION=1`` lets an untested
version through (the imports must still resolve).
"""

from __future__ import annotations

import os
import re
from importlib import metadata

from autoparser import IntegrationError

# The vLLM releases the plugin's tests ran against (tests/integrations/vllm/test_parsers.py).
TESTED_MIN = (0, 33)
TESTED_BELOW = (0, 34)
TESTED_RANGE = ">=0.33,<0.34"
ANY_VERSION_ENV = "AUTOPARSER_VLLM_ANY_VERSION"


def _release(version: str) -> tuple[int, ...]:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else ()


def check_version() -> str:
    """vLLM's version, or IntegrationError when it is missing or outside the tested range
    (the parsers module calls it before importing vLLM's parser API)."""
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError as exc:
        raise IntegrationError(
            f"autoparser's vLLM plugin needs vLLM {TESTED_RANGE}: vllm is not installed"
        ) from exc
    release = _release(version)
    inside = TESTED_MIN <= release[:2] < TESTED_BELOW
    if not inside and os.environ.get(ANY_VERSION_ENV) != "1":
        raise IntegrationError(
            f"autoparser's vLLM plugin is tested with vLLM {TESTED_RANGE}, found {version}; "
            f"set {ANY_VERSION_ENV}=1 to try it anyway"
        )
    return version
