"""What every engine dialect shares: the engine-neutral request and answer (``Generation``,
``Finished``), the one error (``BackendError``), and ``Dialect``, the base a dialect module
fills in: its completion route and payload, its answer and stream readers, its health route,
how it counts a prompt's tokens, how its tokenizer keeps the caller's text plain, and
``detect``, how it recognises its engine.

No aiohttp here (nor in the dialect modules): a dialect talks to its engine through a
``Channel`` (``transport.Transport``), so that the registry of kinds loads without the serve
extra, and at once (the CLI offers the kinds): a dialect module imports the protection
(asyncio) when its first backend is made.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:  # loaded when a request is served, not with the registry (CLI start-up)
    from autoparser import GrammarTrigger
    from autoparser.serve.openai_format import Usage


def described(exc: BaseException) -> str:
    """An exception for the log: its class and message, never its repr (aiohttp's reprs
    spell out connection keys and nested constructors)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class BackendError(Exception):
    """The engine failed. ``public`` is what a client is told (no URL, no exception repr);
    ``kind`` says how (unreachable | timeout | http | invalid), ``timeout`` makes it a 504."""

    def __init__(
        self, public: str, detail: str = "", kind: str = "invalid", http_status: int = 0
    ) -> None:
        super().__init__(public)
        self.public = public
        self.detail = detail or public
        self.kind = kind
        self.http_status = http_status  # the engine's error status (kind "http"), else 0

    @property
    def status(self) -> int:
        return 504 if self.kind == "timeout" else 502

    @property
    def refused(self) -> bool:
        """The engine answered, and said it does not offer this (a 4xx, or an answer not of
        the route's shape): a capability missing, not the engine failing."""
        return self.kind == "invalid" or 400 <= self.http_status < 500

    def __str__(self) -> str:
        return self.public


Prompt = str | list[str | int]
# How a prompt went to the engine: as text, the caller's text checked (none of it would
# become a control token); with the caller's text as token ids (some would have); as text,
# unchecked (no caller spans given: --plain-user-text off; or an engine that cannot tokenize).
PROMPT_FORMS = ("text", "protected", "unchecked")


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """A prompt as it goes to the engine, and its form (one of ``PROMPT_FORMS``)."""

    prompt: Prompt
    form: str


@dataclasses.dataclass(frozen=True)
class Generation:
    """One completion request, engine-neutral. ``caller_spans``: where the caller's text is
    in ``prompt`` (kept from becoming control tokens when the engine can be told so); None:
    not asked for (the prompt goes as it is)."""

    prompt: str
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Mapping[str, object] = dataclasses.field(default_factory=dict)
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    caller_spans: tuple[tuple[int, int], ...] | None = None
    # Token logprobs asked of the engine: how many alternatives per token (0: only the
    # chosen token's); None: not asked.
    logprobs: int | None = None
    # Base64 images, one per ``MediaSupport.marker`` in ``prompt``, in order (a dialect whose
    # engine takes media sends them with the prompt; the prompt then goes as text).
    media: tuple[str, ...] = ()


# One generated token's logprob in OpenAI's chat shape (``token``, ``logprob``, ``bytes``,
# ``top_logprobs``: a list of the same without ``top_logprobs``), whatever the engine wrote.
TokenLogprob = dict[str, object]


@dataclasses.dataclass(frozen=True)
class Scored:
    """A streamed piece with the logprobs of the tokens it came with (only when logprobs
    were asked: a piece is otherwise a plain ``str``)."""

    text: str
    logprobs: tuple[TokenLogprob, ...]


@dataclasses.dataclass(frozen=True)
class MediaSupport:
    """What an engine said it takes besides text (llama.cpp's ``/props`` ``modalities``),
    and the marker text that stands for one image in a prompt."""

    marker: str
    vision: bool = False
    audio: bool = False


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a generation ended: on the token limit or not, the backend's token counts, and
    how its prompt went (``PROMPT_FORMS``)."""

    hit_limit: bool
    usage: Usage
    stop_word: str = ""  # the stop string that ended it, when the engine says (else "")
    prompt_form: str = ""
    # Logprobs asked for: a whole answer's, every token; a stream's, () (they came with
    # its pieces). None: not asked, or the engine gave none.
    logprobs: tuple[TokenLogprob, ...] | None = None

    @property
    def reason(self) -> str:
        """The finish reason the parser takes (``"length"`` makes a cut call not a call)."""
        return "length" if self.hit_limit else "stop"


@dataclasses.dataclass(frozen=True)
class Tokens:
    """One text as the engine tokenized it: ids, and the vocabulary strings of the tokens
    when the engine returns them (vLLM's ``return_token_strs``), else None."""

    ids: list[int]
    strings: list[str] | None = None


@dataclasses.dataclass(frozen=True)
class EngineInfo:
    """What detection learnt of the engine: its kind, and what it told of its model (the
    chat template and special tokens from llama.cpp's ``/props``, a model name)."""

    kind: str
    chat_template: str = ""
    bos_token: str = ""
    eos_token: str = ""
    model: str = ""
    slots: int = 0  # requests the engine runs at once (llama.cpp's total_slots); 0: unknown
    media: MediaSupport | None = None  # None: the engine said nothing of media


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, to the answer's first byte (headers), between two pieces."""

    connect: float = 10.0
    first_byte: float = 300.0
    idle: float = 60.0


class Hooks:
    """What a backend reports as it goes (the server counts it); no-ops by default."""

    def retried(self) -> None:
        """A request was sent again on a fresh connection."""

    def cache(self, name: str, hit: bool) -> None:
        """A cache lookup."""


def read_json(text: str, where: str) -> object:
    """An engine's answer as JSON; a BackendError when it is not."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendError(
            "the engine answered something that is not JSON", f"{where}: {exc}"
        ) from exc


def as_int(value: object) -> int:
    """A count from an engine's answer (0 when it is not an integer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage(prompt_tokens: object = 0, completion_tokens: object = 0) -> Usage:
    """An answer's token counts as the routes report them (``openai_format.Usage``, loaded
    with the first answer: the registry of dialects loads without it)."""
    from autoparser.serve.openai_format import Usage

    return Usage(as_int(prompt_tokens), as_int(completion_tokens))


def logprob_entry(token: str, logprob: object, raw: object = None) -> TokenLogprob:
    """One token's logprob in OpenAI's shape: ``bytes`` as the engine gave them (the token's
    own bytes may be part of a character) else the token's UTF-8."""
    data = raw if isinstance(raw, list) else list(token.encode("utf-8"))
    value = float(logprob) if isinstance(logprob, (int, float)) else -9999.0
    return {"token": token, "logprob": value, "bytes": data}


def token_ids(answer: object, where: str) -> list[int]:
    """The ``tokens`` of a ``/tokenize`` answer (llama.cpp's, vLLM's, SGLang's)."""
    ids = answer.get("tokens") if isinstance(answer, Mapping) else None
    # Every item an int and none a bool, without a Python step per token.
    if not isinstance(ids, list) or not set(map(type, ids)) <= {int}:
        raise BackendError("the engine's tokenizer answered no token list", where)
    return ids


class Channel(Protocol):
    """What a dialect asks of the transport: JSON POSTs to its engine (every failure a
    BackendError, every wait bounded)."""

    url: str

    async def post_json(self, body: Mapping[str, object], path: str) -> object:
        """POST ``body`` to ``path`` and the engine's JSON answer."""
        ...


class Look(Protocol):
    """What detection asks of an engine: ``GET path``'s status and JSON body (None when not
    JSON), each path asked once per detection. An engine that does not answer at all is a
    BackendError (its kind is not known yet)."""

    url: str

    async def get(self, path: str) -> tuple[int, object]: ...


class Protection(Protocol):
    """How the caller's text goes to one engine (``protection.py``)."""

    async def prepare(self, gen: Generation) -> Outgoing:
        """The prompt as sent, and its form (``PROMPT_FORMS``)."""
        ...


class Unprotected:
    """An engine whose tokenizer cannot keep the caller's text plain: the prompt goes as
    text (checked when there is no caller text to check)."""

    async def prepare(self, gen: Generation) -> Outgoing:
        return Outgoing(gen.prompt, "text" if gen.caller_spans == () else "unchecked")


class Dialect:
    """One engine's HTTP API. A dialect module subclasses it, sets ``kind`` (the
    ``--backend-kind`` value), ``path`` (the completion route) and ``health_path``, and is
    listed in ``engines.DIALECTS``. ``protection`` is built at construction, over the
    engine's tokenizer (``protection.py``)."""

    kind: ClassVar[str] = ""
    path: ClassVar[str] = ""
    health_path: ClassVar[str] = "/health"
    # Whether requests name the model (then serve asks ``GET /v1/models`` for one when
    # neither the command line nor detection gave it).
    names_model: ClassVar[bool] = False
    # Whether the completion route can carry images with the prompt (``Generation.media``);
    # then ``detect`` tells whether the engine takes them (``EngineInfo.media``).
    carries_media: ClassVar[bool] = False

    def __init__(self, channel: Channel, model: str = "", hooks: Hooks | None = None) -> None:
        self.channel = channel
        self.model = model
        self.hooks = hooks or Hooks()
        self.protection: Protection = Unprotected()

    @classmethod
    async def detect(cls, look: Look) -> EngineInfo | None:
        """The engine's info when the engine at ``look`` speaks this dialect, else None."""
        raise NotImplementedError

    def payload(self, gen: Generation, prompt: Prompt, stream: bool) -> dict[str, object]:
        """The completion request's body, with ``prompt`` as prepared."""
        raise NotImplementedError

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        """The text and end of a whole (non-streamed) answer."""
        raise NotImplementedError

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        """One stream event's text; what the end needs is kept in ``state``."""
        raise NotImplementedError

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        """How a stream ended, from what its events left in ``state``."""
        raise NotImplementedError

    def read_logprobs(self, body: object, top: int) -> list[TokenLogprob] | None:
        """The token logprobs of a whole answer or a stream event, at most ``top``
        alternatives each; None when it carries none (an engine that gives none: the
        server degrades to ``logprobs: null``)."""
        return None

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        """The ``POST /tokenize`` body that counts ``prompt`` as a generation would."""
        raise NotImplementedError
