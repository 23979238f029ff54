"""Notebooks 05, 06, 11 and 12 at the ends of their knobs' ranges (smoke profile, gloo ranks on the CPU).

The low ends are mostly the defaults (K = 2, WORLD = 2, STAGES = 2, SEED = 0), which make test's
nbval run covers; here each notebook runs once at its high ends (K = 8, WORLD = 8, STAGES = 4,
BLOCK = 128, SEED = 2**63 - 1 in the same run), 12 also at its low end (BLOCK = 16, not its
default), and a value outside a range must stop the notebook with one sentence. The padding and dropping of DistributedSampler at a world size that does not divide
the data (WORLD = 3) is checked on the helper the notebook shows it with, without launching
ranks. The notebook runs are marked `extremes`: `make test` runs them, `make test-oldest`
leaves them out (CI's time).
"""

import json
from contextlib import contextmanager
from unittest import mock

import pytest
import torch

from conftest import REPO
from course_lib.lessons import nb06
from course_lib.workshop import runner

# One folder per torch release, so the newest and the oldest-supported runs sit side by side.
OUT = REPO / "build" / f"test-smoke-torch-{torch.__version__.split('+')[0]}"

TOP_SEED = 2**63 - 1
HIGH_ENDS = {"05_data_parallel": dict(K=8, SEED=TOP_SEED), "06_ddp": dict(WORLD=8, SEED=TOP_SEED),
             "11_model_parallel": dict(STAGES=4, SEED=TOP_SEED), "12_kernels": dict(BLOCK=128, SEED=TOP_SEED)}
LOW_ENDS = {"12_kernels": dict(BLOCK=16)}  # where a low end is not the default
OUTSIDE = {"05_data_parallel": (dict(K=9), "K must be an integer from 2 to 8"),
           "06_ddp": (dict(WORLD=1), "WORLD must be an integer from 2 to 8"),
           "11_model_parallel": (dict(STAGES=5), "STAGES must be an integer from 2 to 4"),
           "12_kernels": (dict(BLOCK=24), "BLOCK must be a power of two from 16 to 128")}


@contextmanager
def knobs(**values):
    """runner.execute with `values` injected beside PROFILE (papermill parameters)."""
    execute = runner.pm.execute_notebook

    def with_knobs(*args, parameters, **kwargs):
        return execute(*args, parameters={**parameters, **values}, **kwargs)

    with mock.patch.object(runner.pm, "execute_notebook", with_knobs):
        yield


def run(name: str, values: dict, folder: str) -> runner.RunResult:
    with knobs(**values):
        return runner.execute(REPO / "notebooks" / f"{name}.ipynb", "smoke", OUT / "ranges" / folder,
                              timeout_s=300)


@pytest.mark.notebook
@pytest.mark.extremes
@pytest.mark.parametrize("name", HIGH_ENDS)
def test_notebook_runs_at_the_high_end_of_every_knob(name):
    values = HIGH_ENDS[name]
    folder = f"{name}-high"
    result = run(name, values, folder)
    assert result.ok, f"{name} with {values}: {result.error}"
    report = json.loads((OUT / "ranges" / folder / "reports" / f"{name}.json").read_text())
    assert report["measurements"], "the notebook recorded nothing"


@pytest.mark.notebook
@pytest.mark.extremes
@pytest.mark.parametrize("name", LOW_ENDS)
def test_notebook_runs_at_the_low_end_of_every_knob(name):
    result = run(name, LOW_ENDS[name], f"{name}-low")
    assert result.ok, f"{name} with {LOW_ENDS[name]}: {result.error}"


@pytest.mark.notebook
@pytest.mark.extremes
@pytest.mark.parametrize("name", OUTSIDE)
def test_a_value_outside_the_range_stops_the_notebook_with_one_sentence(name):
    values, sentence = OUTSIDE[name]
    result = run(name, values, f"{name}-outside")
    assert not result.ok
    assert f"ValueError: {sentence}" in result.error, result.error


def test_sampler_pads_with_the_permutations_first_indices_when_world_does_not_divide_the_data():
    perm = nb06.rank_orders(16, 1, 1)[0][0]  # the permutation every rank draws, epoch 0
    padded = nb06.rank_orders(16, 3, 1, drop_last=False)[0]  # 3 ranks × 6 places for 16 indices
    assert [len(order) for order in padded] == [6, 6, 6]
    seen = sum(padded, [])
    assert set(seen) == set(range(16))
    assert sorted(i for i in set(seen) if seen.count(i) == 2) == sorted(perm[:2])
    dropped = nb06.rank_orders(16, 3, 1)[0]  # drop_last=True: 3 × 5, the last index left out
    assert sorted(sum(dropped, [])) == sorted(perm[:15])
    assert all(order == perm[r:15:3] for r, order in enumerate(dropped))
