"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for the real ``ChatOpenAI``.

It answers ``POST /v1/chat/completions`` streaming (server-sent events, usage in the last
chunk) or not, from the conversation it is sent: no tool result yet means "call the first tool
offered with arguments fitting its schema", a tool result means a final answer quoting it.
It counts the requests it served, so a test can prove a replay sent none.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ARGS = {"lookup_order": {"order_id": "A1"}, "refund": {"order_id": "A1", "amount": 5}}


class FakeOpenAI:
    """Start with :meth:`start`, point ``base_url`` at :attr:`url`, :meth:`stop` when done."""

    def __init__(self) -> None:
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                owner.requests += 1
                reply = _reply(body)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for chunk in _chunks(body, reply):
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps(_completion(body, reply)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    done = [m for m in messages if m.get("role") == "tool"]
    offered = [t["function"]["name"] for t in body.get("tools") or []]
    pending = [name for name in offered if name in _ARGS and not any(m.get("content", "").startswith(_prefix(name)) for m in done)]
    if pending and not done:
        return {"tool_calls": [{"id": f"call_{i}", "name": name, "arguments": json.dumps(_ARGS[name])} for i, name in enumerate(pending)]}
    return {"content": "Done: " + "; ".join(str(m.get("content")) for m in done)}


def _prefix(name: str) -> str:
    return {"lookup_order": "order ", "refund": "refunded "}.get(name, "")


def _usage(body: dict[str, Any]) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages") or []) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}


def _completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if "tool_calls" in reply:
        message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in reply["tool_calls"]]
    finish = "tool_calls" if "tool_calls" in reply else "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "gpt-fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(body),
    }


def _chunks(body: dict[str, Any], reply: dict[str, Any]) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": body.get("model", "gpt-fake")}
    out = []
    if "tool_calls" in reply:
        for i, c in enumerate(reply["tool_calls"]):
            out.append({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": i, "id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": ""}}]}, "finish_reason": None}]})
            for start in range(0, len(c["arguments"]), 8):
                out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": c["arguments"][start : start + 8]}}]}, "finish_reason": None}]})
        finish = "tool_calls"
    else:
        text = reply["content"]
        for start in range(0, len(text), 8):
            out.append({**base, "choices": [{"index": 0, "delta": {"content": text[start : start + 8]}, "finish_reason": None}]})
        finish = "stop"
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    out.append({**base, "choices": [], "usage": _usage(body)})
    return out
