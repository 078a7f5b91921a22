"""memkit where agents live: adapters to other ecosystems' own contracts, each in its own extra.

- `memkit.integrations.mcp_server`: the `memkit mcp` server, memkit's memory tools over the Model
  Context Protocol, every write confirmed by the person through MCP elicitation (`mcp` extra);
  `mcp_changes`: the change it asks about and its one confirmed write (no MCP in it).
- `memkit.integrations.openai_agents`: `MemkitSession`, an openai-agents `Session` kept in memkit's
  store (`agents` extra).

Nothing is imported here, so `import memkit` never needs either extra.
"""

from __future__ import annotations
