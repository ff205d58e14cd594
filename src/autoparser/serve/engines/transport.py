"""The one HTTP transport to an engine, whatever its dialect: JSON POSTs retried once on a
fresh connection, server-sent events read in blocks (the events that arrived together, as
one batch), GETs for health and detection, every wait bounded (``Timeouts``) and every
failure a ``BackendError``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

import aiohttp

from autoparser.serve.engines.base import (
    BackendError,
    Hooks,
    Timeouts,
    described,
    read_json,
)

# Failures of a pooled connection before any response byte: nothing was generated, so the
# request is sent again once, on a fresh connection. A connection the engine closed shows up
# as a disconnect, an OS error, or a reset while the request is written
# (ClientConnectionResetError, which is neither of the others): every connection-level
# error counts, not one subclass.
_STALE = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
)


# The most a line of an engine's event stream may grow to before it is an error (a stream
# that never sends a newline must not fill the memory).
MAX_LINE = 16 << 20


async def _line_batches(response: aiohttp.ClientResponse, idle: float) -> AsyncIterator[list[str]]:
    """The body's complete lines (decoded) as it arrives: each time, the lines of all the
    engine has sent so far (so that pieces that arrived together are read, parsed and
    answered together), the last line also when the body ends without a newline; each
    block within ``idle`` seconds of the previous one. One timer per stream, which only
    looks at the time of the last block when it fires (moving a timer at every block
    costs more than that)."""
    loop = asyncio.get_running_loop()
    expired = False
    last = loop.time()
    timer: asyncio.TimerHandle

    def check() -> None:
        nonlocal expired, timer
        if loop.time() < last + idle:
            timer = loop.call_at(last + idle, check)
            return
        expired = True
        response.close()

    content = response.content
    rest = b""
    timer = loop.call_at(last + idle, check)
    try:
        while block := await content.readany():
            last = loop.time()
            cut = block.rfind(b"\n")
            if cut < 0:
                rest += block
                if len(rest) > MAX_LINE:
                    raise ValueError(f"a line of the event stream is longer than {MAX_LINE} bytes")
                continue
            whole = rest + block[: cut + 1] if rest else block[: cut + 1]
            rest = block[cut + 1 :]
            yield whole.decode("utf-8", errors="replace").split("\n")[:-1]
    except aiohttp.ClientError:
        if not expired:
            raise
    finally:
        timer.cancel()
    if expired:
        raise asyncio.TimeoutError
    if rest:
        yield [rest.decode("utf-8", errors="replace")]


async def sse_event_batches(
    response: aiohttp.ClientResponse, where: str, idle: float
) -> AsyncIterator[list[object]]:
    """The JSON payloads of a ``text/event-stream`` body, until ``[DONE]`` or its end, in
    batches: the events that arrived together (never an empty batch)."""
    try:
        async for lines in _line_batches(response, idle):
            events: list[object] = []
            for line in lines:
                if line.startswith("data:"):  # most lines: no other field to look for
                    value = line[5:].strip()
                else:
                    line = line.strip()
                    if not line or line.startswith(":"):
                        continue
                    field, _, value = line.partition(":")
                    value = value.strip()
                    if field == "error":
                        if events:  # the events before it are the model's output
                            yield events
                        raise BackendError(
                            "the engine reported an error", f"{where}: {value}", "http"
                        )
                    if field != "data":
                        continue
                if value == "[DONE]":
                    if events:
                        yield events
                    return
                try:
                    event = read_json(value, where)
                    if isinstance(event, Mapping) and "error" in event:
                        raise BackendError(
                            "the engine reported an error", f"{where}: {event['error']}", "http"
                        )
                except BackendError:
                    if events:  # the events before it are the model's output
                        yield events
                    raise
                events.append(event)
            if events:
                yield events
    except asyncio.TimeoutError as exc:
        raise BackendError(
            f"the engine sent nothing for {idle:g} s", f"{where}: idle timeout", "timeout"
        ) from exc
    except (aiohttp.ClientError, ValueError) as exc:
        if isinstance(exc, BackendError):
            raise
        raise BackendError(
            "the engine's stream broke off", f"{where}: {described(exc)}", "unreachable"
        ) from exc


async def sse_events(
    response: aiohttp.ClientResponse, where: str, idle: float
) -> AsyncIterator[object]:
    """``sse_event_batches`` one event at a time."""
    async for events in sse_event_batches(response, where, idle):
        for event in events:
            yield event


class Transport:
    """One engine's URL over a shared HTTP session (and a fresh-connection one for the single
    retry): the ``Channel`` dialects post through."""

    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        *,
        fresh: aiohttp.ClientSession | None = None,
        timeouts: Timeouts | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.fresh = fresh or session
        self.timeouts = timeouts or Timeouts()
        self.hooks = hooks or Hooks()

    async def _send(
        self, session: aiohttp.ClientSession, where: str, body: Mapping[str, object]
    ) -> aiohttp.ClientResponse:
        t = self.timeouts
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=t.connect, connect=t.connect)
        return await asyncio.wait_for(session.post(where, json=body, timeout=timeout), t.first_byte)

    async def post(self, body: Mapping[str, object], path: str) -> aiohttp.ClientResponse:
        """POST ``body``: the response, status 200 (any other is a BackendError)."""
        where = f"{self.url}{path}"
        try:
            try:
                response = await self._send(self.session, where, body)
            except _STALE:
                # A kept-alive connection the engine had closed (llama.cpp's server closes
                # them after a few requests): nothing was generated, send it again fresh.
                self.hooks.retried()
                response = await self._send(self.fresh, where, body)
        except asyncio.TimeoutError as exc:
            raise BackendError(
                f"the engine did not answer within {self.timeouts.first_byte:g} s",
                f"{where}: first-byte timeout",
                "timeout",
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise BackendError(
                "the engine is unreachable", f"{where}: {described(exc)}", "unreachable"
            ) from exc
        if response.status != 200:
            try:
                detail = (await asyncio.wait_for(response.text(), self.timeouts.idle))[:500]
            except (aiohttp.ClientError, asyncio.TimeoutError):
                detail = ""
            finally:
                response.release()
            raise BackendError(
                f"the engine answered HTTP {response.status}",
                f"{where}: HTTP {response.status}: {detail}",
                "http",
                response.status,
            )
        return response

    async def post_json(self, body: Mapping[str, object], path: str) -> object:
        """POST ``body`` and the engine's JSON answer, read within the idle timeout: the one
        reader of whole answers (completions, ``/tokenize``, ``/detokenize``)."""
        response = await self.post(body, path)
        where = f"{self.url}{path}"
        try:
            text = await asyncio.wait_for(response.text(), self.timeouts.idle)
        except asyncio.TimeoutError as exc:
            raise BackendError(
                f"the engine sent nothing for {self.timeouts.idle:g} s", where, "timeout"
            ) from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise BackendError(
                "reading the engine's answer failed", f"{where}: {described(exc)}", "unreachable"
            ) from exc
        finally:
            response.release()
        return read_json(text, where)

    async def post_event_batches(
        self, body: Mapping[str, object], path: str
    ) -> AsyncIterator[list[object]]:
        """POST ``body`` and the JSON events of the engine's SSE answer, in batches of those
        that arrived together, each within the idle timeout of the one before."""
        response = await self.post(body, path)
        try:
            where = f"{self.url}{path}"
            async for events in sse_event_batches(response, where, self.timeouts.idle):
                yield events
        finally:
            response.release()

    async def post_events(self, body: Mapping[str, object], path: str) -> AsyncIterator[object]:
        """``post_event_batches`` one event at a time."""
        async for events in self.post_event_batches(body, path):
            for event in events:
                yield event

    async def health(self, path: str) -> str | None:
        """None when ``GET path`` answers 200 within the connect timeout, else why not."""
        try:
            status = await asyncio.wait_for(self._get_status(path), self.timeouts.connect)
        except asyncio.TimeoutError:
            return f"the engine's {path} did not answer within {self.timeouts.connect:g} s"
        except (aiohttp.ClientError, OSError):
            return "the engine is unreachable"
        return None if status == 200 else f"the engine's {path} answered HTTP {status}"

    async def _get_status(self, path: str) -> int:
        async with self.session.get(f"{self.url}{path}") as response:
            await response.read()
            return response.status


async def _get_json(session: aiohttp.ClientSession, where: str) -> tuple[int, object]:
    async with session.get(where) as response:
        if response.status != 200:
            return response.status, None
        try:
            return 200, await response.json(content_type=None)
        except ValueError:
            return 200, None


class Looks:
    """The ``Look`` detection walks dialects with: ``GET`` answers of one engine, each path
    asked once, each within ``timeout`` seconds."""

    def __init__(self, url: str, session: aiohttp.ClientSession, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.timeout = timeout
        self._seen: dict[str, tuple[int, object]] = {}

    async def get(self, path: str) -> tuple[int, object]:
        if path not in self._seen:
            where = f"{self.url}{path}"
            try:
                found = await asyncio.wait_for(_get_json(self.session, where), self.timeout)
            except asyncio.TimeoutError as exc:
                raise BackendError(
                    "the engine did not answer", f"{where}: timeout", "timeout"
                ) from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise BackendError(
                    "the engine is unreachable", f"{where}: {described(exc)}", "unreachable"
                ) from exc
            self._seen[path] = found
        return self._seen[path]
