"""Request-body limit as a pure ASGI middleware: the bytes are counted as they arrive, so a chunked body
(no Content-Length) over the limit is refused too (413) instead of being read whole."""

from __future__ import annotations

from fastapi import HTTPException


class BodyLimit:
    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # FastAPI re-raises an HTTPException met while reading the body
                    raise HTTPException(413, f"request body over {self.max_bytes} bytes")
            return message

        return await self.app(scope, counted, send)
