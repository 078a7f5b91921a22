"""memkit: a persistent, user-scoped memory for AI agents, small enough to read in a class.

The public API is listed in `__all__`; everything else is an implementation detail.
"""

from __future__ import annotations

from .agent import SYSTEM_PROMPT, AgentReply, MemoryAgent
from .approvals import Approvals, Confirmation
from .budget import BudgetedModel, History, Measurement, Request, canonical_json, json_chars, shorten
from .clock import FakeClock, utc_now
from .errors import (
    ApprovalError,
    BudgetError,
    MemkitError,
    ModelError,
    QuotaError,
    StoreError,
    ValidationError,
    WindowError,
)
from .limits import DEFAULT_LIMITS, KINDS, Limits
from .migrations import SCHEMA_VERSION
from .models import FixtureModel, ModelReply, OpenAIModel, ScriptedModel, ToolCall, call, say
from .retrieval import RetrievedContext, retrieve, task_terms
from .store import MemoryStore, Record
from .tools import MemoryTools, tool_schemas
from .window import (
    InProcessWindow,
    RedisHandle,
    RedisWindow,
    ShortTermWindow,
    Turn,
    connect_redis,
    start_embedded_redis,
)

__version__ = "0.1.0"

__all__ = [
    "AgentReply", "InProcessWindow", "RedisHandle", "RedisWindow", "ShortTermWindow", "Turn",
    "connect_redis", "start_embedded_redis", "ApprovalError", "Approvals", "BudgetError", "BudgetedModel", "Confirmation",
    "DEFAULT_LIMITS", "FakeClock", "FixtureModel", "History", "KINDS", "Limits", "Measurement",
    "MemkitError", "MemoryAgent", "MemoryStore", "MemoryTools", "ModelError", "ModelReply",
    "OpenAIModel", "QuotaError", "Record", "Request", "RetrievedContext", "SCHEMA_VERSION",
    "SYSTEM_PROMPT", "ScriptedModel", "StoreError", "ToolCall", "ValidationError", "WindowError",
    "call", "canonical_json", "json_chars", "retrieve", "say", "shorten", "task_terms", "tool_schemas",
    "utc_now",
]
