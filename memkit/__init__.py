"""memkit: a persistent, user-scoped memory for AI agents, small enough to read in a class.

The public API is what a student or an integrator needs, listed in `__all__`. Everything else is
importable from its own module (`memkit.request.History`, `memkit.models.call`, ...).
"""

from __future__ import annotations

from .agent import AgentReply, MemoryAgent
from .approvals import Approvals
from .budget import BudgetedModel
from .clock import FakeClock
from .errors import (
    ApprovalError,
    BudgetError,
    LockedError,
    MemkitError,
    ModelError,
    QuotaError,
    StoreError,
    ValidationError,
    WindowError,
)
from .limits import Limits
from .models import FixtureModel, OpenAIModel, ScriptedModel
from .retrieval import retrieve
from .store import MemoryStore, Record
from .tools import MemoryTools
from .window import InProcessWindow, RedisWindow, ShortTermWindow, start_embedded_redis

__version__ = "0.1.0"

__all__ = [
    # long-term memory
    "MemoryStore", "Record", "Limits",
    # the agent and what it is made of
    "MemoryAgent", "AgentReply", "MemoryTools", "Approvals", "retrieve", "BudgetedModel",
    "FixtureModel", "ScriptedModel", "OpenAIModel",
    # short-term memory
    "ShortTermWindow", "InProcessWindow", "RedisWindow", "start_embedded_redis",
    # time, for tests and notebooks
    "FakeClock",
    # errors
    "MemkitError", "ValidationError", "QuotaError", "StoreError", "LockedError", "ApprovalError",
    "BudgetError", "ModelError", "WindowError",
]
