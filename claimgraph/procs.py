"""Process liveness, the one check behind every "did its process die?" question: the native
core's spill sweep, the embedded writer's announcement and the attached readers' scratch
directories."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists in this pid namespace (another user's counts).

    A pid no process can have (0, negative, past the kernel's range) is not alive: ``kill(0)``
    would signal this process group, not test a process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    except OverflowError:
        return False
    return True
