"""What the notebooks show: tables, charts, small views (ipywidgets) and the memory inspector.

Every view is a thin skin over a plain function that returns data, so a notebook can call the same
function in the next cell and nbval can check it headless. ipywidgets, pandas and matplotlib are
optional (`pip install 'memkit-course[notebooks]'`) and imported on first use: importing this package
does not import them.
"""

from __future__ import annotations

from memkit.inspector import MemoryInspector, NotInspectable, PeerInspector, inspect
from memkit.inspector.proposals_panel import ProposalsPanel, decide, outcome_line

from .charts import DEFAULT_TASKS, PARTS, budget_chart, budget_summary, conversation_rows, measurement_rows
from .sync import run_sync
from .tables import (approvals_table, history_table, messages_table, pending_table, records_table, text_table,
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
