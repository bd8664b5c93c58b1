"""classify_executor_loss with the ExecutorRemoved reason strings Spark 4.3 really posts."""

from __future__ import annotations

import pytest

from region_recovery.model.executors import ExecutorLoss, LossKind, classify_executor_loss

RPC_DISASSOCIATED = (
    "Remote RPC client disassociated. Likely due to containers exceeding thresholds, or network issues. "
    "Check driver logs for WARN messages."
)

# ExecutorPodsLifecycleManager.exitReasonMessage (a stripMargin'd block that starts with a newline),
# exit code rendered through describeExitCode: "137(SIGKILL, possible container OOM)".
K8S_EXITED_137 = (
    "\n"
    "The executor with id 3 exited with exit code 137(SIGKILL, possible container OOM).\n"
    "The API gave the following brief reason: OOMKilled\n"
    "The API gave the following message: N/A\n"
    "\n"
    "The API gave the following container statuses:\n"
    "\n"
    "container name: spark-kubernetes-executor\n"
    "container image: apache/spark:4.3.0\n"
    "container state: terminated\n"
    "container started at: 2026-11-20T10:00:00Z\n"
    "container finished at: 2026-11-20T10:03:12Z\n"
    "exit code: 137\n"
    "termination reason: OOMKilled\n"
    "      "
)


def test_heartbeat_timeout():
    loss = classify_executor_loss("Executor heartbeat timed out after 20576 ms")
    assert loss.kind is LossKind.HEARTBEAT_TIMEOUT
    assert loss.exit_code is None
    assert loss.message == "Executor heartbeat timed out after 20576 ms"


def test_standalone_command_exited_with_code():
    loss = classify_executor_loss("Command exited with code 137")
    assert loss == ExecutorLoss(LossKind.PROCESS_EXITED, 137, "Command exited with code 137")


@pytest.mark.parametrize("code", [1, 52, 56, 143])
def test_standalone_exit_code_is_parsed_not_fixed(code):
    loss = classify_executor_loss(f"Command exited with code {code}")
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, code)


def test_kubernetes_exit_code_one_line():
    loss = classify_executor_loss("The executor with id 3 exited with exit code 137.")
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, 137)


def test_kubernetes_exit_code_multi_line_with_description():
    loss = classify_executor_loss(K8S_EXITED_137)
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, 137)
    assert loss.message == K8S_EXITED_137  # the whole text is kept for reports


def test_kubernetes_pod_deleted_is_process_exit_without_code():
    loss = classify_executor_loss("The executor with id 4 was deleted by a user or the framework.")
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, None)


def test_killed_by_driver():
    loss = classify_executor_loss("Executor killed by driver.")
    assert (loss.kind, loss.exit_code) == (LossKind.KILLED_BY_DRIVER, None)


def test_decommissioned():
    loss = classify_executor_loss("Executor decommission: Finished decommissioning")
    assert (loss.kind, loss.exit_code) == (LossKind.DECOMMISSIONED, None)


def test_worker_shutting_down_is_process_exit_without_code():
    loss = classify_executor_loss("Worker shutting down")
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, None)


def test_process_gone_found_by_the_plugin_is_process_exit_without_code():
    reason = (
        "Executor process gone (region-recovery: its connection to the driver closed and executor 2 on node "
        "10.0.0.1 took its liveness lock)"
    )
    loss = classify_executor_loss(reason)
    assert (loss.kind, loss.exit_code) == (LossKind.PROCESS_EXITED, None)


@pytest.mark.parametrize("reason", [RPC_DISASSOCIATED, "Executor Process Lost", "Pending loss reason."])
def test_vague_reasons_are_other(reason):
    loss = classify_executor_loss(reason)
    assert (loss.kind, loss.exit_code) == (LossKind.OTHER, None)
    assert loss.message == reason


@pytest.mark.parametrize("reason", [None, ""])
def test_missing_reason_is_other_with_empty_message(reason):
    loss = classify_executor_loss(reason)
    assert loss == ExecutorLoss(LossKind.OTHER, None, "")


def test_specificity_ordering():
    other = classify_executor_loss(RPC_DISASSOCIATED)
    heartbeat = classify_executor_loss("Executor heartbeat timed out after 20576 ms")
    killed = classify_executor_loss("Executor killed by driver.")
    decommissioned = classify_executor_loss("Executor decommission: Finished decommissioning")
    worker_down = classify_executor_loss("Worker shutting down")
    exited = classify_executor_loss("Command exited with code 137")
    k8s = classify_executor_loss(K8S_EXITED_137)

    assert other.specificity == 0
    # A kind without an exit code says more than OTHER, an exit code says more still.
    for loss in (heartbeat, killed, decommissioned, worker_down):
        assert other.specificity < loss.specificity < exited.specificity
    assert exited.specificity == k8s.specificity
    assert classify_executor_loss(None).specificity == 0


def test_loss_is_immutable():
    loss = classify_executor_loss("Command exited with code 137")
    with pytest.raises(AttributeError):
        loss.exit_code = 1  # type: ignore[misc]
