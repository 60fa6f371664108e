"""What the lock-time checks of ``plan lock`` read: the lock just resolved, and the image's interpreter."""

from __future__ import annotations

from dataclasses import dataclass

from releasekit.plan.wheels import ImageInterpreter
from releasekit.records.lock import Lock


@dataclass(frozen=True)
class LockContext:
    lock: Lock
    image: ImageInterpreter | None  # None: the toolchain names no python and platform
    strict: bool = False  # warnings of these checks become errors (plan lock --strict)
