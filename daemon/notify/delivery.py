"""What became of one notice at one target: sent, or given up, and after how many attempts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    attempts: int = 1
    error: str = ""  # why it was given up: never a URL (it may carry a token)
