"""Crashes on purpose, for testing a worker: DURABLE_CRASH_AT=POINT[:CLASS].

The worker SIGKILLs itself at that point of a step or a wait, as a crash
would (no cleanup, no release): before_call, after_call, after_receipt,
before_commit and after_commit (of the task), before_wait, after_wait;
CLASS narrows it to a step class or a wait kind (after_call:queryable,
after_wait:await).  Unset, it costs nothing.
"""
from __future__ import annotations

import os
import signal

_CRASH_AT = os.environ.get("DURABLE_CRASH_AT")


def crash_point(point: str, kind: str | None = None) -> None:
    if _CRASH_AT and _CRASH_AT in (point, f"{point}:{kind}"):
        os.kill(os.getpid(), signal.SIGKILL)
