"""course_lib.launcher and course_lib.ranks, and scripts/ddp_train.py, failure_lab.py under real
torchrun (2 gloo ranks)."""

import json
import re
import subprocess
import time

import pytest
import torch

from conftest import NOTEBOOKS, REPO
from course_lib import checkpoint, data, launcher, ranks
from course_lib.lessons import nb06

pytestmark = pytest.mark.versioned  # torch.distributed, FSDP2, DTensor, pipelining: make test-oldest runs it

SMALL = dict(images=256, res=8, hidden=32, batch=16, epochs=2, lr=0.05)


def _args(out, **over) -> list[str]:
    cfg = {**SMALL, **over}
    return [f"--{k}={v}" for k, v in cfg.items()] + [f"--out={out}"]


def _reference() -> dict[str, torch.Tensor]:
    x, y = data.make_tensor_dataset(SMALL["images"], SMALL["res"])
    model = nb06.train_single(x, y, world_size=2, batch=SMALL["batch"], epochs=SMALL["epochs"],
                              lr=SMALL["lr"], hidden=SMALL["hidden"])
    return model.state_dict()


def _assert_equal_to_reference(final: dict[str, torch.Tensor]) -> None:
    ref = _reference()
    assert final.keys() == ref.keys()
    for k in ref:  # fp32; only the order of the gradient sums differs
        torch.testing.assert_close(final[k], ref[k], atol=1e-6, rtol=1e-5)


# ---- launches ---------------------------------------------------------------------------------

def test_ddp_on_two_ranks_equals_one_process_on_the_global_batches(tmp_path):
    run = launcher.launch("ddp_train", _args(tmp_path, **{"bench-steps": 1, "bench-repeats": 2}),
                          timeout_s=120, echo=False)
    assert run.ok and run.returncode == 0
    final = checkpoint.load_checkpoint(tmp_path / "final.pt")
    steps_per_epoch = SMALL["images"] // (2 * SMALL["batch"])
    assert final["step"] == SMALL["epochs"] * steps_per_epoch
    _assert_equal_to_reference(final["model"])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["world_size"] == 2 and results["backend"] == "gloo"
    assert len(results["step_s"]["ddp"]) == 2 and all(t > 0 for t in results["step_s"]["ddp"])
    assert results["peak_bytes"] == [0, 0]  # one entry per rank; no GPU memory on the CPU


def test_two_node_rehearsal_trains_the_same_weights(tmp_path):
    runs = launcher.launch_nodes("ddp_train", _args(tmp_path), nnodes=2, nproc=1, timeout_s=120,
                                 echo=False)
    assert [r.returncode for r in runs] == [0, 0]
    assert any("--node_rank=1" in part for part in runs[1].command)
    _assert_equal_to_reference(checkpoint.load_checkpoint(tmp_path / "final.pt")["model"])


def test_restart_resumes_from_the_checkpoint_without_losing_a_step(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    run = launcher.launch("ddp_train", _args(tmp_path) + [f"--ckpt={ckpt}", "--save-every=3",
                                                          "--crash-at=5"],
                      max_restarts=1, timeout_s=120, echo=False)
    assert run.ok
    for local in (0, 1):  # every rank loaded rank 0's checkpoint of step 3
        assert any("resumed" in ln and "step 3" in ln for ln in run.rank_lines(local))
    final = checkpoint.load_checkpoint(tmp_path / "final.pt")
    assert final["step"] == SMALL["epochs"] * SMALL["images"] // (2 * SMALL["batch"])
    _assert_equal_to_reference(final["model"])


def test_a_rank_that_raises_fails_the_job_fast_with_the_rank_named():
    start = time.monotonic()
    with pytest.raises(launcher.LaunchError) as err:
        launcher.launch("failure_lab", ["--mode=raise", "--rank=1"], timeout_s=60, echo=False)
    assert time.monotonic() - start < 40
    message = str(err.value)
    assert message.startswith("failure_lab.py failed: rank 1 raised ValueError")
    assert "Last lines:" in message


def test_a_killed_rank_is_named_without_an_exception():
    run = launcher.launch("failure_lab", ["--mode=kill", "--rank=1"], timeout_s=60, echo=False,
                          check=False)
    assert not run.ok and run.failure is not None
    assert "rank 1 was killed by signal SIGKILL" in run.failure


def test_a_skipped_collective_ends_by_the_process_group_timeout():
    run = launcher.launch("failure_lab", ["--mode=skip", "--rank=1", "--timeout=2"], timeout_s=60,
                          echo=False, check=False)
    assert not run.ok
    assert run.seconds < 40  # the 2 s process-group timeout, not the 60 s wall clock
    assert run.failure.startswith("failure_lab.py failed: rank 0 raised")  # the rank left waiting


def test_the_wall_clock_timeout_stops_every_process():
    run = launcher.launch("failure_lab", ["--mode=sleep", "--steps=7777"], timeout_s=10, echo=False,
                          check=False)
    assert run.returncode is None and "did not finish within 10 s" in run.failure
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", "failure_lab.py --mode=sleep --steps=7777"],
                          capture_output=True, text=True).stdout.split()
    assert left == []


# ---- the launcher's pieces --------------------------------------------------------------------

@pytest.mark.parametrize("budget, sizes, most", [
    (8, [2, 2, 2], 6),  # all three at once
    (8, [4, 4, 4], 8),  # two at once, the third when one ends
    (8, [8, 8, 8], 8),  # one at a time
    (8, [16, 2], 16),  # a job larger than the budget runs alone
])
def test_launch_each_keeps_the_processes_running_at_once_within_its_budget(monkeypatch, budget,
                                                                             sizes, most):
    import threading
    running, peak, order, lock = [0], [0], [], threading.Lock()

    def fake_launch(name, args, *, nproc=2, **kw):
        with lock:
            running[0] += nproc
            peak[0] = max(peak[0], running[0])
            order.append(name)
        time.sleep(0.05)
        with lock:
            running[0] -= nproc
        return name

    monkeypatch.setattr(launcher, "launch", fake_launch)
    jobs = [(f"job{i}", [], dict(nproc=n)) for i, n in enumerate(sizes)]
    assert launcher.launch_each(jobs, max_procs=budget) == [f"job{i}" for i in range(len(sizes))]
    assert peak[0] == most
    assert order == [f"job{i}" for i in range(len(sizes))]  # started in order


def test_torchrun_command_binds_the_rendezvous_to_loopback():
    cmd = launcher.torchrun_command(launcher.script("ddp_train"), ["--epochs=1"], nproc=2, port=29999)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert "--rdzv_endpoint=127.0.0.1:29999" in cmd and "--nproc_per_node=2" in cmd
    assert cmd[-2:] == [str(launcher.script("ddp_train")), "--epochs=1"]
    assert launcher.shell(cmd).startswith("torchrun --nnodes=1")
    with pytest.raises(ValueError):
        launcher.torchrun_command("x.py", nnodes=2, node_rank=2)


def test_missing_script_is_one_sentence():
    with pytest.raises(FileNotFoundError, match="No distributed script nope.py"):
        launcher.script("nope")


def test_backend_is_nccl_only_with_a_gpu_per_rank(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert ranks.backend_for(2) == "gloo"  # NCCL cannot place two ranks on one GPU
    assert ranks.backend_for(1) == ("nccl" if torch.distributed.is_nccl_available() else "gloo")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ranks.backend_for(1) == "gloo"


def test_a_forced_backend_wins_and_a_wrong_one_is_one_sentence(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv(ranks.BACKEND_ENV, "gloo")  # 06: the 1-rank job on the W-rank job's device
    assert ranks.backend_for(1) == "gloo"
    monkeypatch.setenv(ranks.BACKEND_ENV, "mpi")
    with pytest.raises(ValueError, match="COURSE_DIST_BACKEND"):
        ranks.backend_for(1)


def test_entry_records_the_exception_of_a_rank(tmp_path, monkeypatch):
    monkeypatch.setenv(ranks.STATUS_ENV, str(tmp_path))
    monkeypatch.setenv("RANK", "3")

    @ranks.entry
    def main():
        raise KeyError("no such batch")

    with pytest.raises(KeyError):
        main()
    status = json.loads((tmp_path / "rank3.json").read_text())
    assert status["state"] == "error" and status["error"] == "KeyError" and status["rank"] == 3


def test_diagnose_prefers_the_rank_that_raised_first(tmp_path):
    for rank, t, err in ((0, 2.0, "RuntimeError"), (1, 1.0, "ValueError")):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(
            dict(rank=rank, local_rank=rank, node=0, pid=1, state="error", time=t, error=err,
                 message="m")))
    run = launcher.Run(["python", "-m", "torch.distributed.run", "--nproc_per_node=2", "s.py"], 1, 1.0,
                       ["[default1]:last words"], tmp_path)
    message = launcher.diagnose([run])
    assert message.startswith("s.py failed: rank 1 raised ValueError: m (rank 0 then RuntimeError).")
    assert message.endswith("last words")


def test_source_shows_a_marked_block_numbered_as_in_the_file(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text("import os\n\ndef f():\n    # >>> the part\n    x = 1\n    return x\n    # <<< the part\n")
    assert launcher.source(script, "the part") == "   5  x = 1\n   6  return x"  # dedented, file line numbers
    collectives = launcher.source("ddp_comm", "collectives")
    for call in ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor"):
        assert f"dist.{call}(" in collectives
    with pytest.raises(ValueError):
        launcher.source("ddp_comm", "no such block")
    with pytest.raises(FileNotFoundError):
        launcher.source(tmp_path / "missing.py", "the part")


def test_multi_node_commands_and_slurm_script(tmp_path):
    cmds = launcher.node_commands("ddp_train", ["--epochs=1"], nnodes=2, nproc=8, head="10.1.2.3")
    assert len(cmds) == 2 and cmds[0] == cmds[1]  # c10d: the agents number the nodes
    assert "--rdzv_endpoint=10.1.2.3:29500" in cmds[0] and cmds[0].endswith("--epochs=1")
    path = tmp_path / "job.sh"
    path.write_text(launcher.slurm_script("ddp_train", nodes=4, gpus_per_node=8))
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0  # valid shell
    assert "#SBATCH --nodes=4" in path.read_text()


# ---- notebook 06's helpers ---------------------------------------------------------------------

def test_rank_orders_split_the_data_and_reshuffle_only_with_set_epoch():
    orders = nb06.rank_orders(12, 2, 3)
    for epoch in orders:
        assert sorted(epoch[0] + epoch[1]) == list(range(12))
    assert orders[0][0] != orders[1][0]
    frozen = nb06.rank_orders(12, 2, 3, set_epoch=False)
    assert frozen[0] == frozen[1] == frozen[2] == [orders[0][0], orders[0][1]]


def test_check_epoch_orders_catches_a_missing_set_epoch():
    def good(n, world, rank, epochs):
        return [o[rank] for o in nb06.rank_orders(n, world, epochs)]

    def forgot(n, world, rank, epochs):
        return [o[rank] for o in nb06.rank_orders(n, world, epochs, set_epoch=False)]

    nb06.check_epoch_orders(good)
    with pytest.raises(AssertionError, match="set_epoch"):
        nb06.check_epoch_orders(forgot)


def test_check_same_collectives_catches_a_rank_zero_only_collective():
    import torch.distributed as tdist

    def rank0_only(loss):
        if tdist.get_rank() == 0:
            tdist.all_reduce(loss)

    def every_rank(loss):
        mean = loss.detach().clone()
        tdist.all_reduce(mean)

    def every_rank_in_place(loss):
        tdist.all_reduce(loss)

    assert nb06.collective_calls(rank0_only) == [["all_reduce", "(changed the caller's loss in place)"], []]
    with pytest.raises(AssertionError, match="in place"):
        nb06.check_same_collectives(every_rank_in_place)
    with pytest.raises(AssertionError, match="rank 1 calls nothing"):
        nb06.check_same_collectives(rank0_only)
    nb06.check_same_collectives(every_rank)
    assert not tdist.is_initialized()  # the simulation left torch.distributed as it was


def test_rehearsed_nodes_keep_to_the_gpus_this_process_was_given():
    """A notebook started with CUDA_VISIBLE_DEVICES=4,5,6,7 rehearses its nodes on 4-7, not 0-3."""
    assert launcher.node_gpus(2, 2, 4, visible="4,5,6,7") == ["4,5", "6,7"]
    assert launcher.node_gpus(2, 1, 4, visible="") == ["0", "1"]  # unset: the GPUs as numbered
    assert launcher.node_gpus(3, 1, 3, visible="GPU-a, GPU-b, GPU-c") == ["GPU-a", "GPU-b", "GPU-c"]
    assert launcher.node_gpus(2, 2, 3, visible="0,1,2") == ["", ""]  # too few: gloo on the CPU


def test_every_block_a_notebook_shows_is_marked_in_its_script():
    cells = ["".join(c["source"]) for nb in NOTEBOOKS for c in json.loads(nb.read_text())["cells"]
             if c["cell_type"] == "code"]
    shown = [m for cell in cells for m in re.findall(r'launcher\.source\("(\w+)", "([^"]+)"\)', cell)]
    assert len(shown) == 10  # 05: the three ways; 06: collectives, the hook and its registration,
    # compute then communicate, no_sync, ddp, fully_shard, failure_lab's skip; 11: 2D (11's
    # pipeline and tensor-parallel scripts are cells that write them, tied to scripts/ by test_nb11)
    for name, block in shown:
        lines = (REPO / "scripts" / f"{name}.py").read_text().splitlines()
        for numbered in launcher.source(name, block).splitlines():  # "  95  code": the file's line 95
            number, _, code = numbered.strip().partition("  ")
            assert lines[int(number) - 1].strip() == code.strip()
