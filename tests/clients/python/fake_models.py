"""Fake model providers for the turn tests: the Anthropic Messages API and OpenAI Chat
Completions, both streaming, both scriptable per test.

Each fake is a ``ThreadingHTTPServer`` on ``127.0.0.1:0`` running in a daemon thread.
Tests script replies into a queue *keyed by a token* (any string, normally a unique word
the test puts in its user message): a request whose JSON body contains the token takes
the next reply of that token's queue. Keying by content keeps tests independent even
when a session-scoped server still has a turn of an earlier test in flight. A request
that matches no key takes from the unkeyed queue, or gets a short default text reply.

Every request is recorded (path, headers, parsed body, which key it matched, how far
the reply got, whether the client hung up), so a test can assert the conversation the
worker sent.

Anthropic wire (``POST /v1/messages`` with ``stream: true``): ``message_start`` (usage
with ``cache_read_input_tokens`` / ``cache_creation_input_tokens``), ``ping``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` for text
(``text_delta``), thinking (``thinking_delta`` + ``signature_delta``) and tool use
(``input_json_delta``), ``message_delta`` (stop reason, output usage), ``message_stop``;
errors as HTTP statuses with the JSON error envelope, or an in-stream ``event: error``.

OpenAI wire (``POST /v1/chat/completions`` with ``stream: true``): ``data:`` chunks of
``chat.completion.chunk`` with ``delta.content`` / ``delta.tool_calls``, a final chunk
with ``finish_reason``, a usage chunk (``stream_options.include_usage``), ``data: [DONE]``.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

# ---------------------------------------------------------------------------------------
# Scripts


def text(value: str, *, chunks: int = 3, delay: float | None = None) -> dict[str, Any]:
    """A text block, streamed as `chunks` text deltas (each after `delay`, if given)."""
    return {"type": "text", "text": value, "chunks": chunks, "delay": delay}


def thinking(value: str, *, signature: str | None = None, chunks: int = 2, delay: float | None = None) -> dict[str, Any]:
    """An extended-thinking block: thinking deltas, then one signature delta."""
    return {
        "type": "thinking",
        "thinking": value,
        "signature": signature or "sig_" + uuid.uuid4().hex,
        "chunks": chunks,
        "delay": delay,
    }


def tool_use(name: str, input: dict[str, Any], *, id: str | None = None, chunks: int = 3) -> dict[str, Any]:
    """A tool call; its input JSON is streamed as `chunks` partial-JSON deltas."""
    return {"type": "tool_use", "name": name, "input": input, "id": id or "toolu_" + uuid.uuid4().hex[:24], "chunks": chunks}


@dataclass
class Usage:
    input_tokens: int = 25
    output_tokens: int = 7
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass
class Reply:
    """One scripted response.

    * ``blocks`` / ``stop_reason``: a normal streamed response;
    * ``delay``: seconds before every streamed event after ``message_start`` (a block's own
      ``delay`` overrides it for that block's deltas);
    * ``status``: answer with this HTTP status and a JSON error body instead of a stream;
    * ``stream_error``: after ``error_after`` blocks, send an in-stream ``event: error`` of
      this error type and close;
    * ``cut_after``: after this many blocks, drop the connection mid-body (an HTTP-level
      truncation: the chunked body never terminates);
    * ``truncate_after``: after this many blocks, end the body cleanly but without
      ``message_delta`` / ``message_stop`` (a protocol-level truncation);
    * ``gate``: hold the response until the test calls ``open_gate(gate)`` (Anthropic
      only): the test acts at a known point of the turn, without timing.
    """

    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    delay: float = 0.0
    status: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    stream_error: str | None = None
    error_after: int = 0
    cut_after: int | None = None
    truncate_after: int | None = None
    gate: str | None = None


def say(value: str, **usage: int) -> Reply:
    return Reply(blocks=[text(value)], usage=Usage(**usage) if usage else Usage())


def call(name: str, input: dict[str, Any], *, preface: str | None = None, id: str | None = None) -> Reply:
    blocks = ([text(preface)] if preface else []) + [tool_use(name, input, id=id)]
    return Reply(blocks=blocks, stop_reason="tool_use")


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def http_error(status: int, message: str | None = None) -> Reply:
    return Reply(status=status, error_type=ERROR_TYPES.get(status, "api_error"), error_message=message)


def overloaded() -> Reply:
    return http_error(529, "Overloaded")


def slow(value: str, *, chunks: int, delay: float, preface: str | None = None) -> Reply:
    """A reply whose (last) text block trickles out: `chunks` deltas, `delay` s apart."""
    blocks = ([text(preface, chunks=1)] if preface else []) + [text(value, chunks=chunks, delay=delay)]
    return Reply(blocks=blocks)


def _split(value: str, parts: int) -> list[str]:
    parts = max(1, min(parts, len(value) or 1))
    size = -(-len(value) // parts) if value else 0
    if not value:
        return [""]
    return [value[i : i + size] for i in range(0, len(value), size)]


# ---------------------------------------------------------------------------------------
# Recording


@dataclass
class Received:
    """One request a fake received."""

    path: str
    headers: dict[str, str]
    body: Any
    key: str | None
    at: float
    reply: Reply | None = None
    events_sent: int = 0
    blocks_done: int = 0
    finished: bool = False
    disconnected: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    # The client's (host, port): tells which process made the request.
    peer: Any = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    def blocks(self, type_: str) -> list[dict[str, Any]]:
        """Every content block of `type_` in the request's messages (Anthropic shape)."""
        out = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list):
                out.extend(b for b in content if isinstance(b, dict) and b.get("type") == type_)
        return out

    def texts(self) -> list[str]:
        out = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.extend(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        return out


class ClientGone(Exception):
    pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeModelServer"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        self.server.fake.handle(self, self.path, body)

    # -- writing helpers ----------------------------------------------------------------

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError) as err:
            raise ClientGone() from err

    def end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError as err:
            raise ClientGone() from err

    def peer_closed(self) -> bool:
        """Whether the client has closed its side (non-blocking peek)."""
        try:
            self.connection.setblocking(False)
            try:
                data = self.connection.recv(1, socket.MSG_PEEK)
            finally:
                self.connection.setblocking(True)
            return data == b""
        except BlockingIOError:
            return False
        except OSError:
            return True


class FakeModelServer:
    """Common machinery: the keyed reply queues, the request log, the HTTP server."""

    name = "fake"

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key or f"sk-fake-{uuid.uuid4().hex}"
        self._lock = threading.Condition()
        self._queues: dict[str | None, list[Reply]] = {}
        self._gates: dict[str, threading.Event] = {}
        self.requests: list[Received] = []
        self.default_reply: Callable[[], Reply] = lambda: say("ok")
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"{self.name}-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- scripting ------------------------------------------------------------------------

    def script(self, key: str | None, *replies: Reply) -> None:
        """Queues `replies` for requests whose body contains `key` (None: unmatched ones)."""
        with self._lock:
            self._queues.setdefault(key, []).extend(copy.deepcopy(list(replies)))

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name: str) -> None:
        """Lets the replies held by ``gate=name`` go (now and later)."""
        self._gate(name).set()

    def pending(self, key: str | None) -> int:
        with self._lock:
            return len(self._queues.get(key, []))

    def _take(self, body: Any) -> tuple[str | None, Reply]:
        text = json.dumps(body) if not isinstance(body, str) else body
        with self._lock:
            # Of the keys the body mentions, the one mentioned last (the newest message)
            # that still has replies wins; with none left, the newest mentioned key.
            matches = sorted(
                ((text.rfind(key), key) for key in self._queues if key is not None and key in text), reverse=True
            )
            for _, key in matches:
                if self._queues[key]:
                    return key, self._queues[key].pop(0)
            if matches:
                return matches[0][1], self.default_reply()
            queue = self._queues.get(None) or []
            if queue:
                return None, queue.pop(0)
        return None, self.default_reply()

    # -- observing ------------------------------------------------------------------------

    def received(self, key: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if key is None or r.key == key]

    def wait_requests(self, key: str | None, count: int, timeout: float = 20.0) -> list[Received]:
        """Blocks until `count` requests matched `key`; returns them all."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                got = [r for r in self.requests if r.key == key]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: expected {count} request(s) for {key!r} within {timeout:.0f} s, got {len(got)}"
                    )
                self._lock.wait(min(left, 0.2))

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what} not reached within {timeout:.0f} s")
            time.sleep(0.02)

    # -- serving --------------------------------------------------------------------------

    def handle(self, handler: _Handler, path: str, body: Any) -> None:
        key, reply = self._take(body)
        record = Received(path=path, headers={k.lower(): v for k, v in handler.headers.items()}, body=body, key=key, at=time.time(), reply=reply, peer=handler.client_address)
        with self._lock:
            self.requests.append(record)
            self._lock.notify_all()
        try:
            self.serve(handler, path, body, reply, record)
            record.finished = True
        except ClientGone:
            record.disconnected = True
            handler.close_connection = True
        finally:
            record.done.set()
            with self._lock:
                self._lock.notify_all()

    def serve(self, handler: _Handler, path: str, body: Any, reply: Reply, record: Received) -> None:
        raise NotImplementedError

    @staticmethod
    def pause(handler: _Handler, seconds: float) -> None:
        """Sleeps, noticing a client that hung up meanwhile."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if handler.peer_closed():
                raise ClientGone()
            time.sleep(min(left, 0.05))


# ---------------------------------------------------------------------------------------
# Anthropic Messages API


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropic(FakeModelServer):
    """``POST /v1/messages`` (``stream: true``) speaking the Messages streaming protocol."""

    name = "fake-anthropic"

    def serve(self, handler: _Handler, path: str, body: Any, reply: Reply, record: Received) -> None:
        if path.split("?")[0] != "/v1/messages":
            handler.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {path}"}})
            return
        presented = handler.headers.get("x-api-key") or (handler.headers.get("authorization") or "").removeprefix("Bearer ")
        if presented != self.api_key:
            handler.send_json(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
            return
        if reply.status is not None:
            headers = {"retry-after": "1"} if reply.status in (429, 529) else {}
            handler.send_json(
                reply.status,
                {
                    "type": "error",
                    "error": {"type": reply.error_type or "api_error", "message": reply.error_message or "scripted error"},
                    "request_id": "req_fake_" + uuid.uuid4().hex[:12],
                },
                headers,
            )
            return
        if not isinstance(body, dict) or body.get("stream") is not True:
            handler.send_json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "this fake only streams"}})
            return
        model = body.get("model", "claude")
        if reply.gate is not None and not self._gate(reply.gate).wait(60):
            raise AssertionError(f"{self.name}: gate {reply.gate!r} was not opened within 60 s")
        handler.start_stream()

        def emit(event: str, data: dict[str, Any], delay: float | None = None) -> None:
            wait = reply.delay if delay is None else delay
            if wait:
                self.pause(handler, wait)
            handler.chunk(_sse(event, data))
            record.events_sent += 1

        usage = reply.usage
        emit(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake_" + uuid.uuid4().hex[:20],
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage.input_tokens,
                        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                        "cache_read_input_tokens": usage.cache_read_input_tokens,
                        "output_tokens": 1,
                    },
                },
            },
            delay=0.0,
        )
        emit("ping", {"type": "ping"})
        for index, block in enumerate(reply.blocks):
            if reply.stream_error and index == reply.error_after:
                break
            if reply.cut_after is not None and index == reply.cut_after:
                handler.close_connection = True
                return  # no terminating chunk: the body ends abruptly
            if reply.truncate_after is not None and index == reply.truncate_after:
                break
            self._block(emit, index, block)
            record.blocks_done += 1
        if reply.stream_error:
            emit(
                "error",
                {"type": "error", "error": {"type": reply.stream_error, "message": reply.error_message or "Overloaded"}},
            )
            handler.end_stream()
            handler.close_connection = True
            return
        if reply.cut_after is not None and reply.cut_after >= len(reply.blocks):
            handler.close_connection = True
            return
        if reply.truncate_after is not None:
            handler.end_stream()
            return
        emit(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage.output_tokens},
            },
        )
        emit("message_stop", {"type": "message_stop"})
        handler.end_stream()

    @staticmethod
    def _block(emit: Callable[..., None], index: int, block: dict[str, Any]) -> None:
        kind = block["type"]
        delay = block.get("delay")
        if kind == "text":
            emit("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            for piece in _split(block["text"], block.get("chunks", 3)):
                emit(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                    delay,
                )
        elif kind == "thinking":
            emit(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            )
            for piece in _split(block["thinking"], block.get("chunks", 2)):
                emit(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
                    delay,
                )
            emit(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}},
            )
        elif kind == "tool_use":
            emit(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                },
            )
            for piece in _split(json.dumps(block["input"]), block.get("chunks", 3)):
                emit(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                    delay,
                )
        else:
            raise ValueError(f"unknown block type {kind!r}")
        emit("content_block_stop", {"type": "content_block_stop", "index": index})


# ---------------------------------------------------------------------------------------
# OpenAI Chat Completions


class FakeOpenAI(FakeModelServer):
    """``POST /v1/chat/completions`` (``stream: true``) speaking the chunk protocol.

    The same `Reply` scripts serve: text blocks become ``delta.content`` pieces, tool_use
    blocks become ``delta.tool_calls``; thinking blocks are skipped.
    """

    name = "fake-openai"

    def serve(self, handler: _Handler, path: str, body: Any, reply: Reply, record: Received) -> None:
        if path.split("?")[0] != "/v1/chat/completions":
            handler.send_json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error", "code": None}})
            return
        if handler.headers.get("authorization") != f"Bearer {self.api_key}":
            handler.send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
            return
        if reply.status is not None:
            handler.send_json(
                reply.status,
                {"error": {"message": reply.error_message or "scripted error", "type": reply.error_type or "server_error", "code": None}},
            )
            return
        model = body.get("model", "gpt") if isinstance(body, dict) else "gpt"
        ident = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        handler.start_stream()

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None, delay: float | None = None) -> None:
            wait = reply.delay if delay is None else delay
            if wait:
                self.pause(handler, wait)
            data: dict[str, Any] = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
            data["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            data["usage"] = usage
            handler.chunk(f"data: {json.dumps(data)}\n\n".encode())
            record.events_sent += 1

        chunk({"role": "assistant", "content": ""}, delay=0.0)
        calls = 0
        for block in reply.blocks:
            if block["type"] == "text":
                for piece in _split(block["text"], block.get("chunks", 3)):
                    chunk({"content": piece}, delay=block.get("delay"))
            elif block["type"] == "tool_use":
                index = calls
                calls += 1
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": {"name": block["name"], "arguments": ""}}
                        ]
                    }
                )
                for piece in _split(json.dumps(block["input"]), block.get("chunks", 3)):
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, delay=block.get("delay"))
            record.blocks_done += 1
        finish = "tool_calls" if calls else {"end_turn": "stop", "max_tokens": "length"}.get(reply.stop_reason, "stop")
        chunk({}, finish=finish)
        include_usage = isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage")
        if include_usage:
            u = reply.usage
            prompt = u.input_tokens + u.cache_read_input_tokens
            chunk(
                None,
                usage={
                    "prompt_tokens": prompt,
                    "completion_tokens": u.output_tokens,
                    "total_tokens": prompt + u.output_tokens,
                    "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
                },
            )
        handler.chunk(b"data: [DONE]\n\n")
        handler.end_stream()


def iter_sse(raw: bytes) -> Iterator[tuple[str | None, str]]:
    """Parses an SSE body into (event, data) pairs (for self-tests of the fakes)."""
    for frame in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        event, data = None, []
        for line in frame.decode().split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if event or data:
            yield event, "\n".join(data)
