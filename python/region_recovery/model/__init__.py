"""The live model: what the application is doing, built from the plugin's event stream.

``live`` holds jobs, stages, shuffles and executors, ``retention`` the retained-output part of it,
``executors`` the classification of why an executor was lost.
"""

from .executors import ExecutorLoss, LossKind, classify_executor_loss
from .live import ExecutorState, Failure, Job, LiveModel, MapOutput, Recomputation, Shuffle, Stage, StageAttempt
from .retention import Adoption, RetainedOutput

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
