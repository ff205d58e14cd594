"""Loading chat templates, the jinja2 sandbox, capability probing, message normalisation."""

from autoparser.template.caps import TemplateQuirks
from autoparser.template.chat_template import ChatTemplate, TemplateCaps
from autoparser.template.loading import TemplateSource

__all__ = ["ChatTemplate", "TemplateCaps", "TemplateQuirks", "TemplateSource"]
