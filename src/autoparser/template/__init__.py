"""Loading chat templates, the jinja2 sandbox, capability probing, message normalisation."""

from autoparser.template.chat_template import ChatTemplate, TemplateCaps

__all__ = ["ChatTemplate", "TemplateCaps"]
