"""The servers the kit starts, adopts or connects to, and how each one stops.

None of this is the memory model: these modules know processes, sockets and folders, never users,
turns or records (`memkit.window` and `memkit.store` re-export what a student calls).
"""

from __future__ import annotations
