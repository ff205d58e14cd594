"""Hand-written formats are recognised by a fingerprint of the template source."""

from __future__ import annotations

import pytest
from helpers.paths import OWN_TEMPLATES, corpus_dir

from autoparser.analysis.fingerprints import FINGERPRINTS, STANDARD, detect_format
from autoparser.formats import get_handler, registered


def test_every_fingerprinted_format_has_a_handler() -> None:
    names = {name for name, _ in FINGERPRINTS}
    assert STANDARD not in names and names <= set(registered())
    assert len({get_handler(name) for name in names}) == len(names)


@pytest.mark.parametrize(
    ("template", "name"),
    [
        ("handlers/harmony_like.jinja", "harmony"),
        ("handlers/functionary_v3_2_like.jinja", "functionary_v3_2"),
        ("handlers/gemma4_like.jinja", "gemma4"),
        ("formats/chatml_hermes.jinja", STANDARD),
    ],
)
def test_own_templates_are_told_apart(template: str, name: str) -> None:
    assert detect_format((OWN_TEMPLATES / template).read_text()) == name


@pytest.mark.parametrize(
    ("filename", "name"),
    [
        ("openai-gpt-oss-120b.jinja", "harmony"),
        ("meetkai-functionary-medium-v3.2.jinja", "functionary_v3_2"),
        ("google-gemma-4-31B-it.jinja", "gemma4"),
        ("meetkai-functionary-medium-v3.1.jinja", STANDARD),  # no ">>>" recipient switch
    ],
)
def test_real_templates_are_recognised(filename: str, name: str) -> None:
    root = corpus_dir()
    if root is None or not (root / filename).is_file():
        pytest.skip("template not in the corpus (../shared/templates)")
    assert detect_format((root / filename).read_text()) == name


def test_the_first_matching_fingerprint_wins() -> None:
    first, second = FINGERPRINTS[0][1], FINGERPRINTS[1][1]
    assert detect_format(second + first) == FINGERPRINTS[0][0]
