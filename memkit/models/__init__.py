"""The models the agent talks to: scripted fixtures that need nothing, and a live OpenAI-compatible client.

All of them speak chat-completions messages and answer with a `ModelReply`. Fixtures record every
request they receive, so a notebook or a test can look at exactly what a model was shown.
"""

from __future__ import annotations

from ..remembering import ONE_OFF, PROFILE_KEYS, REMEMBER_RULE, STATEMENTS
from .fixture import FixtureModel, propose
from .live import DEFAULT_MODEL_TIMEOUT_S, OpenAIModel
from .scripted import ModelReply, RecordingModel, ScriptedModel, ScriptStep, ToolCall, call, say, user_envelope

__all__ = [
    "DEFAULT_MODEL_TIMEOUT_S", "ONE_OFF", "PROFILE_KEYS", "REMEMBER_RULE", "STATEMENTS", "FixtureModel",
    "ModelReply", "OpenAIModel", "RecordingModel", "ScriptStep", "ScriptedModel", "ToolCall", "call",
    "propose", "say", "user_envelope",
]
