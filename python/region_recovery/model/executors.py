"""Why an executor was lost, read from the reason Spark posts with SparkListenerExecutorRemoved.

The strings are Spark 4.3's, checked against its source: HeartbeatReceiver, the
standalone ExecutorRunner, Kubernetes' pod lifecycle manager, decommissioning, driver kills.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class LossKind(str, enum.Enum):
    HEARTBEAT_TIMEOUT = "heartbeat-timeout"
    PROCESS_EXITED = "process-exited"
    KILLED_BY_DRIVER = "killed-by-driver"
    DECOMMISSIONED = "decommissioned"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class ExecutorLoss:
    kind: LossKind
    exit_code: int | None
    message: str

    @property
    def specificity(self) -> int:
        """How much the reason tells; a duplicate removal may upgrade a vaguer first one."""
        if self.kind is LossKind.OTHER:
            return 0
        return 2 if self.exit_code is not None else 1


_HEARTBEAT = re.compile(r"heartbeat timed out after (\d+) ms", re.IGNORECASE)
_EXIT_CODE = re.compile(r"(?:exited with (?:exit )?code|exit code:?)\s*(-?\d+)", re.IGNORECASE)


def classify_executor_loss(reason: str | None) -> ExecutorLoss:
    text = reason or ""
    if _HEARTBEAT.search(text):
        return ExecutorLoss(LossKind.HEARTBEAT_TIMEOUT, None, text)
    if text.startswith("Executor decommission") or "decommission" in text.lower():
        return ExecutorLoss(LossKind.DECOMMISSIONED, None, text)
    if text.startswith("Executor killed by driver"):
        return ExecutorLoss(LossKind.KILLED_BY_DRIVER, None, text)
    m = _EXIT_CODE.search(text)
    if m:
        return ExecutorLoss(LossKind.PROCESS_EXITED, int(m.group(1)), text)
    if (
        "Worker shutting down" in text
        or "was deleted by a user or the framework" in text
        or text.startswith("Executor process gone")  # region-recovery found it gone (its liveness lock)
    ):
        return ExecutorLoss(LossKind.PROCESS_EXITED, None, text)
    return ExecutorLoss(LossKind.OTHER, None, text)
