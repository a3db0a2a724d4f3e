"""Typed errors for everything a user can get wrong.

Every error a user can cause (a bad file, a bad flag, a bad profile, a broken plugin) is a
subclass of `PccxFlowError` whose message is one line that says what is wrong and how to fix
it. The CLI prints that line and exits non-zero without a traceback; the API raises the typed
exception so callers can tell the cases apart. Anything else that escapes is a bug.
"""

from __future__ import annotations


class PccxFlowError(Exception):
    """Base class of every user-facing error; its message is a single line."""


class ConfigError(PccxFlowError):
    """Unknown preset or an inconsistent model configuration."""


class WeightsError(PccxFlowError):
    """A checkpoint directory or file that cannot be used as it is."""


class MissingTensorError(WeightsError):
    """A tensor the model needs is not in the checkpoint."""


class TensorFormatError(WeightsError):
    """A tensor with the wrong shape or dtype, a truncated file, or a refused pickle."""


class InputError(PccxFlowError):
    """A token id, position, prompt or option value that is out of range."""


class ProfileError(PccxFlowError):
    """A hardware profile that is unknown or malformed."""


class GraphError(PccxFlowError):
    """A decode graph that breaks an invariant (a cycle, a misrouted PLE write, ...)."""


class ScheduleError(PccxFlowError):
    """An invalid schedule: the message names the first violation."""


class PolicyError(PccxFlowError):
    """An unknown scheduling policy, or a policy (plugin) that raised or misbehaved."""


class ExecutionError(PccxFlowError):
    """A node kernel failed while executing a decode graph; the message names the node."""


class RenderError(PccxFlowError):
    """A picture cannot be drawn (for example Graphviz's `dot` is missing)."""


class TraceError(PccxFlowError):
    """A trace file (.pccx or Chrome trace JSON) that cannot be read as a timeline."""


class BoardError(PccxFlowError):
    """A board (or fake board) that cannot be opened, does not answer, or reports a fault."""
