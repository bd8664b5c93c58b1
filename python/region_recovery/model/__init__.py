"""The live model: what the application is doing, built from the plugin's event stream.

``live`` holds jobs, stages, shuffles and executors (``entities``: what they are made of), ``retained``
the retained outputs it owns, ``executors`` the classification of why an executor was lost.
"""

from .entities import Adoption, ExecutorState, Failure, Job, MapOutput, Recomputation, Shuffle, Stage, StageAttempt
from .executors import ExecutorLoss, LossKind, classify_executor_loss
from .live import LiveModel
from .retained import RetainedOutput

__all__ = [
    "Adoption",
    "ExecutorLoss",
    "ExecutorState",
    "Failure",
    "Job",
    "LiveModel",
    "LossKind",
    "MapOutput",
    "Recomputation",
    "RetainedOutput",
    "Shuffle",
    "Stage",
    "StageAttempt",
    "classify_executor_loss",
]
