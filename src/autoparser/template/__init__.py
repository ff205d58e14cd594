"""The renderer: loading chat templates, the jinja2 sandbox, capability probing, polyfills.

Everything here takes plain data (template text, tokens, messages); the public
``ChatTemplate`` in :mod:`autoparser.chat` composes it.
"""

from autoparser.template.caps import (
    TemplateCaps,
    TemplateQuirks,
    detect_caps,
    detect_quirks,
    template_caps,
)
from autoparser.template.loading import TemplateSource
from autoparser.template.polyfill import apply_polyfills, render_as_apply
from autoparser.template.renderer import Renderer
from autoparser.template.switches import ThinkingSwitch

__all__ = [
    "Renderer",
    "TemplateCaps",
    "TemplateQuirks",
    "TemplateSource",
    "ThinkingSwitch",
    "apply_polyfills",
    "detect_caps",
    "detect_quirks",
    "render_as_apply",
    "template_caps",
]
