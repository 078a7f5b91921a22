"""memkit: a persistent, user-scoped memory for AI agents, small enough to read in a class.

The public API is listed in `__all__`; everything else is an implementation detail.
"""

from __future__ import annotations

from .agent import SYSTEM_PROMPT, AgentReply, MemoryAgent
from .approvals import Approvals, Confirmation
from .budget import (BudgetedModel, ChatModel, History, Measurement, PreparedRequest, Request, canonical_json,
                     json_chars, shorten)
from .clock import Clock, FakeClock, utc_now
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
    "AgentReply", "ApprovalError", "Approvals", "BudgetedModel", "BudgetError", "call",
    "canonical_json", "ChatModel", "Clock", "Confirmation", "connect_redis", "DEFAULT_LIMITS",
    "FakeClock", "FixtureModel", "History", "InProcessWindow", "json_chars", "KINDS", "Limits",
    "Measurement", "MemkitError", "MemoryAgent", "MemoryStore", "MemoryTools", "ModelError",
    "ModelReply", "OpenAIModel", "PreparedRequest", "QuotaError", "Record", "RedisHandle", "RedisWindow", "Request",
    "retrieve", "RetrievedContext", "say", "SCHEMA_VERSION", "ScriptedModel", "shorten",
    "ShortTermWindow", "start_embedded_redis", "StoreError", "SYSTEM_PROMPT", "task_terms",
    "tool_schemas", "ToolCall", "Turn", "utc_now", "ValidationError", "WindowError",
]
