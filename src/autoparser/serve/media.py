"""Images and documents in requests: sent to the engine when it takes them, else a short
text placeholder naming what was left out, or refused (``--media auto|placeholder|reject``).

One rule for every API. The Responses and Messages mappings turn an image they may forward
into a chat-completions ``image_url`` part (``image_part``); the chat path then decides, per
request, once the engine is known (``MediaRoute``): an image whose data is in the request (a
base64 ``data:`` URL) goes to an engine that said it takes images (llama.cpp's ``/props``
``modalities.vision``) as the engine's marker text in the prompt, where the image was, and
its data alongside, in order; the engine's projector puts the model's own image tokens
there. Anything else is a placeholder and a degradation (a log line and a metric): an engine
without vision or a dialect that cannot carry images (vLLM, SGLang, OpenAI-style
``/v1/completions``), an image by URL (serve makes no outbound requests), audio, documents.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from autoparser.serve.engines.base import MediaSupport
from autoparser.serve.limits import Degradation, InvalidRequest

MEDIA_POLICIES = ("auto", "placeholder", "reject")
# Content parts that are not text, by API: what each is called in a placeholder.
MEDIA_PARTS = {
    "image_url": "image", "input_image": "image", "image": "image",
    "input_audio": "audio", "audio": "audio",
    "file": "document", "input_file": "document", "document": "document",
}  # fmt: skip
_SHOWN = 80  # characters of an image URL a log line names


def media_placeholder(kind: str, where: str, policy: str, why: str = "") -> Degradation:
    """A media part the engine path cannot carry: a 400 naming it under ``reject``, else
    what replaces it (``placeholder_text``) and its log line (``why``: the reason, when
    the engine might have taken it)."""
    if policy == "reject":
        raise InvalidRequest(
            f"{where}: {kind} content is not supported by this server (text only)", where
        )
    because = f" ({why})" if why else ""
    return Degradation("media", "media", f"{where}: {kind} replaced by a text placeholder{because}")


def placeholder_text(kind: str) -> str:
    """The text the model sees where an image or document was left out."""
    return f"[{kind} omitted: this model cannot see it]"


def forwards(policy: str) -> bool:
    """Whether a mapping passes images on to the chat path (which decides per engine)."""
    return policy == "auto"


def image_part(url: str, media_type: object = None) -> dict[str, object]:
    """An image as a chat-completions content part (the mappings' hand-over; its
    ``media_type``, when the API gave one, names it in a placeholder)."""
    part: dict[str, object] = {"type": "image_url", "image_url": {"url": url}}
    if isinstance(media_type, str) and media_type:
        part["media_type"] = media_type
    return part


def _image_url(part: Mapping[str, object]) -> str:
    """The URL of a chat ``image_url`` part (an object with ``url``, or, as some clients
    send it, the URL itself); "" when there is none."""
    value = part.get("image_url")
    if isinstance(value, Mapping):
        value = value.get("url")
    return value if isinstance(value, str) else ""


def base64_image(url: str) -> tuple[str, str]:
    """The base64 data of an image ``data:`` URL, or "" and why it cannot be sent. Checked
    here, at C speed: the engine's decoder stops silently at the first character outside
    the alphabet (line breaks, which some clients wrap base64 with, are taken out)."""
    if not url.startswith("data:"):
        shown = url if len(url) <= _SHOWN else url[:_SHOWN] + "..."
        return "", f"an image URL cannot be fetched, only data: URLs are sent: {shown}"
    head, comma, data = url.partition(",")
    if not comma or not head.endswith(";base64"):
        return "", "not a base64 data: URL"
    if not head[5:].lower().startswith("image/"):
        return "", f"{head[5:].split(';', 1)[0] or 'untyped'} data is not an image"
    for text in (data, "".join(data.split())):
        try:
            if base64.b64decode(text, validate=True):
                return text, ""
        except (binascii.Error, ValueError):
            continue
    return "", "its data is not valid base64"


class MediaRoute:
    """One request's media: the policy, what the engine takes (None: nothing, or its
    dialect cannot carry it), and the images sent so far, in prompt order."""

    def __init__(self, policy: str, engine: MediaSupport | None = None, withheld: str = "") -> None:
        self.policy = policy
        self.engine = engine if policy == "auto" and not withheld else None
        self.withheld = withheld  # why images that could go are not sent ("": they are)
        self.images: list[str] = []

    def text(self, part: Mapping[str, object], where: str, found: list[Degradation]) -> str:
        """What the prompt holds where the media ``part`` was: the engine's marker (its data
        kept in ``images``), else a placeholder with its degradation appended to ``found``
        (a 400 under ``reject``)."""
        kind = MEDIA_PARTS[str(part["type"])]
        why = ""
        if self.policy == "auto":
            why = self._why_not(kind, part)
            if not why and self.engine is not None:
                data, why = base64_image(_image_url(part))
                if not why:
                    self.images.append(data)
                    return self.engine.marker
        named = part.get("media_type")  # an Anthropic image's, kept by ``image_part``
        if kind == "image" and isinstance(named, str) and named:
            kind = f"image ({named[:_SHOWN]})"
        found.append(media_placeholder(kind, where, self.policy, why))
        return placeholder_text(kind)

    def _why_not(self, kind: str, part: Mapping[str, object]) -> str:
        """Why a media part of ``kind`` cannot go to the engine ("": it can)."""
        if kind == "document":
            return "documents are not sent to engines"
        if kind != "image":
            return f"{kind} is not sent to engines"
        if self.withheld:
            return self.withheld
        if self.engine is None:
            return "the engine takes no images"
        if not self.engine.vision:
            return "the engine reports no vision"
        if part.get("type") != "image_url":
            return f"an image as a {part.get('type')} part cannot be sent (image_url can)"
        return ""

    def placed(self, prompt: str) -> bool:
        """Whether ``prompt`` holds exactly one marker per image sent (a template that drops
        a turn, or caller text spelling the marker, would pair images with the wrong
        places)."""
        if self.engine is None or not self.images:
            return True
        return prompt.count(self.engine.marker) == len(self.images)
