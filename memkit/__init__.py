"""memkit: a persistent, user-scoped memory for AI agents, small enough to read in a class.

The public API is what a student or an integrator needs, listed in `__all__` (at most 35 names).
Everything else is importable from its own module (`memkit.store.Record`, `memkit.agent.AgentReply`,
`memkit.errors.ProposalError`, `memkit.models.call`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .agent import MemoryAgent
from .approvals import Approvals
from .budget import BudgetedModel
from .clock import FakeClock
from .errors import (
    ApprovalError,
    BudgetError,
    CommittedThenFailedError,
    LockedError,
    MemkitError,
    ModelError,
    QuotaError,
    ReadOnlyError,
    StoreError,
    ValidationError,
    WindowError,
)
from .forgetting import ForgetIncomplete, forget_user
from .limits import Limits
from .models import FixtureModel, OpenAIModel, ScriptedModel
from .retrieval import retrieve
from .semantic import load_embedder
from .store import MemoryStore, Store, open_store
from .tools import MemoryTools
from .window import InProcessWindow, RedisWindow, ShortTermWindow, StoreWindow, start_embedded_redis

if TYPE_CHECKING:  # imported on first use (see __getattr__): psycopg is an optional extra
    from .store.postgres.server import start_embedded_postgres
    from .store.postgres.store import PostgresStore

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 -- grouped by concept under comments, not alphabetical
    # long-term memory: one façade (`Store`) over SQLite, or PostgreSQL (the `postgres` extra)
    "Store", "MemoryStore", "Limits", "open_store", "PostgresStore", "start_embedded_postgres",
    # the agent and what it is made of
    "MemoryAgent", "MemoryTools", "Approvals", "retrieve", "BudgetedModel",
    "FixtureModel", "ScriptedModel", "OpenAIModel",
    # retrieval by meaning (the `semantic` extra, imported when a model is loaded)
    "load_embedder",
    # short-term memory: in this process, in the store's own file, or in Redis
    "ShortTermWindow", "InProcessWindow", "StoreWindow", "RedisWindow", "start_embedded_redis",
    # forgetting a user everywhere: every window the store used, then the store
    "forget_user", "ForgetIncomplete",
    # time, for tests and notebooks
    "FakeClock",
    # errors
    "MemkitError", "ValidationError", "QuotaError", "StoreError", "LockedError", "ReadOnlyError",
    "ApprovalError", "BudgetError", "ModelError", "WindowError",
    "CommittedThenFailedError",
]


def __getattr__(name: str) -> object:
    """PostgreSQL's names on first use: the `store.postgres` wing (and psycopg, the `postgres` extra)
    is imported only then."""
    if name == "PostgresStore":
        from .store.opening import postgres_store_class

        return postgres_store_class()
    if name == "start_embedded_postgres":
        from .store.postgres.server import start_embedded_postgres

        return start_embedded_postgres
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
