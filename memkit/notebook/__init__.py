"""What the notebooks show: tables, charts, small views (ipywidgets) and the memory inspector.

- `tables`: records, histories, tool results, messages and confirmations as DataFrames, shown
  projector-ready (`text_table`: text columns left-aligned, at most 15 rows);
- `charts`: a request's parts against its budget, and the scripted conversation behind the chart;
- `views`: the budget explorer, the confirm form, the user switcher and the isolation scans;
- `inspector`: `MemoryInspector`, for any memkit database (read-only unless asked), with
  confirm-gated corrections; `inspect` opens whatever it is given;
- `peer_views`: `PeerInspector` for other frameworks' memory files, `NotInspectable` for the rest;
- `peer_samples`: sample memory files of openai-agents, LangGraph and mem0, to have one to open;
- `workspace`: a notebook run's own temporary folder, and fresh names for its experiments;
- `processes`: a function written in a cell, run in new processes (to race them, or to kill one);
- `exercises`: the verdicts of the exercises' check cells.

Every view is a thin skin over a plain function that returns data, so a notebook can call the same
function in the next cell and nbval can check it headless. ipywidgets, pandas and matplotlib are
optional (`pip install 'memkit[notebooks]'`) and imported on first use: importing this package
does not import them.
"""

from __future__ import annotations

from ._support import run_sync
from .charts import DEFAULT_TASKS, PARTS, budget_chart, budget_summary, conversation_rows, measurement_rows
from .inspector import MemoryInspector, NotInspectable, PeerInspector, inspect
from .proposals_view import ProposalsPanel, decide, outcome_line, pending_table
from .tables import (approvals_table, history_table, messages_table, records_table, text_table,
                     tool_results_table)
from .views import (BudgetExplorer, ConfirmForm, UserSwitcher, confirm_from_form, cross_user_scan, scan_requests,
                    what_user_sees)
from .workspace import Workspace

__all__ = [  # noqa: RUF022 -- grouped by concept under comments, not alphabetical
    # tables
    "records_table", "history_table", "tool_results_table", "messages_table", "approvals_table", "text_table",
    # charts and the runs behind them
    "budget_chart", "budget_summary", "conversation_rows", "measurement_rows", "DEFAULT_TASKS", "PARTS",
    # views
    "BudgetExplorer", "ConfirmForm", "confirm_from_form", "UserSwitcher", "what_user_sees",
    "scan_requests", "cross_user_scan", "run_sync",
    # the inspector
    "MemoryInspector", "PeerInspector", "NotInspectable", "inspect",
    "ProposalsPanel", "decide", "outcome_line", "pending_table",  # a person decides what the model proposed
    # a notebook's workspace
    "Workspace",
]
