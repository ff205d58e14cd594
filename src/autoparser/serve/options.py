"""One validated set of generation options (sampling, limits, stops), whatever the route.

Every field is type- and range-checked here, so nothing an engine would refuse is ever sent:
a client's mistake is a 400 naming the field, not the engine's 502. Routes map their own
field names onto ``SamplingOptions.from_fields`` (chat completions uses the OpenAI names).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Literal, overload

from autoparser.serve.limits import InvalidRequest

MAX_STOPS = 16
MAX_STOP_CHARS = 1000
MAX_LOGIT_BIAS = 1024

# name -> (low, high, integer?): inclusive ranges; None is unbounded.
_NUMBERS: dict[str, tuple[float | None, float | None, bool]] = {
    "temperature": (0.0, 2.0, False),
    "top_p": (0.0, 1.0, False),
    "min_p": (0.0, 1.0, False),
    "typical_p": (0.0, 1.0, False),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
    "repeat_penalty": (0.0, 10.0, False),
    "repetition_penalty": (0.0, 10.0, False),
    "top_k": (-1, 1_000_000, True),
    "seed": (-1, 2**32 - 1, True),  # llama.cpp takes a uint32 (-1: random)
}
NUMBER_FIELDS = tuple(_NUMBERS)


@overload
def number(
    value: object, name: str, low: float | None, high: float | None, integer: Literal[True]
) -> int: ...
@overload
def number(
    value: object, name: str, low: float | None, high: float | None, integer: bool
) -> int | float: ...
def number(value: object, name: str, low: float | None, high: float | None, integer: bool) -> float:
    """``value`` if it is a finite number (an integer when asked) within [low, high]."""
    what = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise InvalidRequest(f"{name}: must be {what}, got {type(value).__name__}", name)
    if not math.isfinite(value):
        raise InvalidRequest(f"{name}: must be a finite number", name)
    if (low is not None and value < low) or (high is not None and value > high):
        raise InvalidRequest(f"{name}: must be between {low:g} and {high:g}, got {value}", name)
    return value


def boolean(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name}: must be a boolean, got {type(value).__name__}", name)
    return value


@dataclasses.dataclass(frozen=True)
class SamplingOptions:
    """What the engine is asked besides the prompt and grammar, validated."""

    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    numbers: Mapping[str, float | int] = dataclasses.field(default_factory=dict)
    logit_bias: Mapping[str, float] = dataclasses.field(default_factory=dict)
    ignore_eos: bool = False

    @classmethod
    def from_fields(
        cls, body: Mapping[str, object], max_tokens_fields: tuple[str, ...] = ("max_tokens",)
    ) -> SamplingOptions:
        """Read the options under their OpenAI names; the first of ``max_tokens_fields``
        present is the token limit."""
        max_tokens = None
        for name in max_tokens_fields:
            if body.get(name) is not None:
                max_tokens = number(body[name], name, 1, 10_000_000, True)
                break
        numbers = {
            name: number(body[name], name, *_NUMBERS[name])
            for name in NUMBER_FIELDS
            if body.get(name) is not None
        }
        return cls(
            max_tokens=max_tokens,
            stop=_stops(body.get("stop")),
            numbers=numbers,
            logit_bias=_logit_bias(body.get("logit_bias")),
            ignore_eos=boolean(body.get("ignore_eos", False), "ignore_eos"),
        )

    def engine_fields(self) -> dict[str, object]:
        """The sampling fields as llama.cpp and vLLM both name them."""
        out: dict[str, object] = dict(self.numbers)
        if self.logit_bias:
            out["logit_bias"] = dict(self.logit_bias)
        if self.ignore_eos:
            out["ignore_eos"] = True
        return out


def _stops(stop: object) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise InvalidRequest("stop: must be a non-empty string or a list of them", "stop")
    if len(stops) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise InvalidRequest(
            f"stop: at most {MAX_STOPS} stop strings of at most {MAX_STOP_CHARS} characters",
            "stop",
        )
    return tuple(stops)


def _logit_bias(bias: object) -> dict[str, float]:
    if bias is None:
        return {}
    if not isinstance(bias, Mapping):
        raise InvalidRequest("logit_bias: must be an object of token id -> bias", "logit_bias")
    if len(bias) > MAX_LOGIT_BIAS:
        raise InvalidRequest(f"logit_bias: at most {MAX_LOGIT_BIAS} entries", "logit_bias")
    out: dict[str, float] = {}
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()):
            raise InvalidRequest(
                f"logit_bias: keys must be token ids (non-negative integers), got {key!r}",
                "logit_bias",
            )
        out[key] = number(value, f"logit_bias.{key}", -100, 100, False)
    return out
