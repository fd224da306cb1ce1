"""Tasks spread over this process and worker processes (mapper/workers.py): results in
order whatever the number of workers, this process taking the first (largest) task, and
the first failing task's error raised."""

from __future__ import annotations

import operator

import pytest

from fusemap.mapper.workers import spread


def _squares(jobs: int, count: int):
    here, ended = [], []

    def local(i: int) -> int:
        here.append(i)
        return i * i

    out = spread(
        jobs, count, lambda i: (operator.mul, (i, i)), local, lambda i, r: ended.append((i, r))
    )
    return out, here, ended


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_in_order_whoever_computed_them(jobs):
    out, here, ended = _squares(jobs, 9)
    assert out == [i * i for i in range(9)]
    assert sorted(ended) == [(i, i * i) for i in range(9)]  # each once, with its result
    assert here[0] == 0  # this process takes the first task: it starts at once
    if jobs == 1:
        assert here == list(range(9))


def test_nothing_to_do():
    assert _squares(2, 0)[0] == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_first_failing_tasks_error_is_raised(jobs):
    """Tasks 3 and 5 fail (here or in a worker); task 3's error is raised, whichever
    ended first."""

    def number(i: int) -> str:
        return str(i) if i not in (3, 5) else f"x{i}"

    with pytest.raises(ValueError, match="'x3'"):
        spread(jobs, 8, lambda i: (int, (number(i),)), lambda i: int(number(i)))


def test_a_backend_the_caller_chose_runs_every_task():
    """Under a joblib backend chosen by the caller (``map --scheduler``: a Dask
    cluster's), every task goes to it, none runs here."""
    import joblib

    with joblib.parallel_config(backend="threading"):
        out, here, ended = _squares(2, 5)
    assert out == [i * i for i in range(5)]
    assert here == []
    assert ended == [(i, i * i) for i in range(5)]
