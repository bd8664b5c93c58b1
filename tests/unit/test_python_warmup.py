"""When job recovery starts the executors' Python workers ahead, and how many tasks it runs (jobrecovery.warmup)."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from region_recovery.config import ConfigError
from region_recovery.jobrecovery import warmup

RESUBMISSION = {"enabled": True, "shuffles_replayed": 3, "python_shuffles_replayed": 1}


def test_a_resubmission_that_skips_python_stages_warms_the_workers():
    assert warmup.wanted({}, RESUBMISSION) == "1 replayed shuffle(s) ran Python code"


@pytest.mark.parametrize(
    "conf, status",
    [
        ({}, None),  # job recovery off
        ({}, {"enabled": False, "refused": "spark.io.encryption.enabled=true"}),
        ({}, {"enabled": True, "shuffles_replayed": 0, "python_shuffles_replayed": 0}),  # a first run
        ({}, {"enabled": True, "shuffles_replayed": 2, "python_shuffles_replayed": 0}),  # no Python was skipped
        ({"spark.regionRecovery.job-recovery.warm-python-workers": "false"}, RESUBMISSION),
        ({"spark.python.worker.reuse": "false"}, RESUBMISSION),  # a started worker would serve no later task
    ],
)
def test_no_warm_up_where_it_would_serve_nothing(conf, status):
    assert warmup.wanted(conf, status) is None


def test_a_bad_setting_is_an_error_even_in_a_first_run():
    with pytest.raises(ConfigError, match="warm-python-workers"):
        warmup.wanted({"spark.regionRecovery.job-recovery.warm-python-workers": "sometimes"}, None)


@pytest.mark.parametrize(
    "conf, expected",
    [
        ({"spark.master": "local-cluster[2,1,1024]"}, 2),
        ({"spark.master": "local-cluster[ 3 , 2 , 512 ]"}, 3),
        ({"spark.master": "spark://h:7077", "spark.executor.instances": "4"}, 4),
        ({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.initialExecutors": "5"}, 5),
        ({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.minExecutors": "0"}, 1),
        ({"spark.dynamicAllocation.enabled": "true", "spark.executor.instances": "4"}, None),
        ({"spark.master": "spark://h:7077"}, None),  # standalone takes what the workers offer
    ],
)
def test_the_executors_to_wait_for_come_from_the_settings(conf, expected):
    assert warmup.expected_executors(conf) == expected


@pytest.mark.parametrize(
    "conf, executors, parallelism, tasks",
    [
        ({"spark.master": "local-cluster[2,1,1024]"}, 2, 2, 2),
        ({"spark.executor.cores": "4", "spark.task.cpus": "2"}, 3, 99, 6),
        ({"spark.executor.cores": "1", "spark.task.cpus": "2"}, 3, 99, 3),  # at least one task each
        ({}, 2, 8, 8),  # the registered cores, through Spark's default parallelism
        ({"spark.default.parallelism": "200"}, 2, 200, 2),  # the user's value says nothing of the cores
    ],
)
def test_one_task_per_task_slot(conf, executors, parallelism, tasks):
    assert warmup.task_slots(conf, executors, parallelism) == tasks


@given(
    executors=st.integers(1, 64),
    cores=st.integers(1, 16),
    task_cpus=st.integers(1, 16),
)
def test_every_executor_gets_a_task(executors, cores, task_cpus):
    conf = {"spark.executor.cores": str(cores), "spark.task.cpus": str(task_cpus)}
    assert warmup.task_slots(conf, executors, 2) >= executors


class _Clock:
    """A clock the wait advances by its own sleeps (patched time.sleep)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(warmup.time, "sleep", c.sleep)
    return c


def test_the_wait_ends_when_the_expected_executors_registered(clock):
    counts = itertools.chain([0, 0, 1, 1, 2], itertools.repeat(2))
    assert warmup._wait_for_executors(lambda: next(counts), 2, deadline=30, clock=clock) == 2
    assert clock.now < 1


def test_without_an_expected_count_the_wait_ends_once_the_count_settles(clock):
    counts = itertools.chain([0] * 20, [1] * 3, itertools.repeat(3))
    assert warmup._wait_for_executors(lambda: next(counts), None, deadline=30, clock=clock) == 3
    assert 2.0 < clock.now < 4.0  # 2 s with none, then SETTLE_S after the last change


def test_the_wait_gives_up_at_the_deadline_with_what_registered(clock):
    assert warmup._wait_for_executors(lambda: 1, 4, deadline=30, clock=clock) == 1
    assert clock.now == pytest.approx(30, abs=0.2)


@pytest.mark.parametrize(
    "conf, tasks",
    [
        ({"spark.master": "local-cluster[2,1,1024]"}, 2),
        ({"spark.executor.instances": "3", "spark.executor.cores": "4", "spark.task.cpus": "2"}, 6),
        ({"spark.executor.instances": "3"}, None),  # the cores are the workers' (standalone): known at registration
        ({"spark.executor.cores": "4"}, None),
        ({"spark.master": "local[4]"}, None),
    ],
)
def test_the_job_is_planned_before_the_executors_register_where_the_settings_say_enough(conf, tasks):
    assert warmup.planned_tasks(conf) == tasks
