"""Structured logging: one JSON object per line on stderr (key=value fields kept)."""

from __future__ import annotations

import json
import logging
import sys
import time

__all__ = ["JsonFormatter", "configure_logging"]

_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Render a record as JSON with its ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(level: int = logging.WARNING) -> None:
    """Send ragloom's logs to stderr as JSON lines at ``level``."""
    logger = logging.getLogger("ragloom")
    logger.setLevel(level)
    if not any(getattr(h, "_ragloom", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._ragloom = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
