"""memkit where agents live: adapters to other ecosystems' own contracts (`mcp_server`, the `mcp`
extra; `openai_agents` and `agents_tools`, the `agents` extra).

Nothing is imported here, so `import memkit` never needs either extra.
"""

from __future__ import annotations
