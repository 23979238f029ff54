"""course_lib.sharding: the bytes each rank holds, counted from real tensors and from a fake group."""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from course_lib import sharding

pytestmark = pytest.mark.versioned  # FSDP2 (fully_shard) and the fake process group: make test-oldest runs it


def small() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 3))  # weights (20, 10), (3, 20)


def test_fake_world_bytes_exact_at_8():
    ddp, w8 = sharding.fake_world_bytes(small, [8])
    full = 4 * (200 + 20 + 60 + 3)
    assert (ddp.world, ddp.params, ddp.grads, ddp.optim) == (None, full, full, 2 * full + 4 * 4)
    shard = 4 * (3 * 10 + 3 + 1 * 20 + 1)  # ceil(20/8) = 3 rows, ceil(3/8) = 1 row
    assert (w8.world, w8.params, w8.grads, w8.optim) == (8, shard, shard, 2 * shard + 16)
    assert w8.total == 4 * shard + 16
    assert not dist.is_initialized()


def test_fake_world_bytes_twice_in_a_row():
    first = sharding.fake_world_bytes(small, [8, 64])
    assert sharding.fake_world_bytes(small, [8, 64]) == first
    assert [r.world for r in first] == [None, 8, 64]
    assert not dist.is_initialized()


def test_fake_group_destroyed_on_error():
    def broken() -> nn.Module:
        if dist.is_initialized():  # only inside the fake group: the DDP row builds it first
            raise ValueError("broken model")
        return small()

    with pytest.raises(ValueError):
        sharding.fake_world_bytes(broken, [8])
    assert not dist.is_initialized()
    with pytest.raises(KeyError):
        with sharding.fake_group(4):
            raise KeyError("inside")
    assert not dist.is_initialized()
    assert sharding.fake_world_bytes(small, [8])[1].world == 8  # usable again


def test_fake_group_refuses_a_second_group():
    with sharding.fake_group(2):
        with pytest.raises(RuntimeError):
            sharding.fake_world_bytes(small, [8])
        assert dist.get_world_size() == 2  # the outer group is untouched
    assert not dist.is_initialized()


def test_counting_on_real_tensors():
    """The byte counters and the AdamW formula against a real optimizer step."""
    model = small()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert sharding.grad_bytes(model) == 0 and sharding.optimizer_bytes(opt) == 0
    model(torch.randn(4, 10)).sum().backward()
    opt.step()
    params = sharding.local_bytes(model)
    assert params == sharding.local_bytes(list(model.parameters())) == 4 * 283
    assert sharding.grad_bytes(model) == params
    assert sharding.optimizer_bytes(opt) == sharding.adamw_state_bytes(params, 4)
    assert sharding.tensor_bytes(torch.zeros(3, 5, dtype=torch.bfloat16)) == 30
