"""Pipeline parallelism written out: a model's blocks split over W processes (the stages), one
batch run as m micro-batches handed from stage to stage with point-to-point sends, in GPipe's
order and in 1F1B's (notebook 11).

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/pipeline.py --micro 1 2 4 8 --out build/dist/pipeline

Every rank builds the whole model from one seed and keeps its own stage: a contiguous slice of
blocks. Stage s receives its input from stage s - 1 (``recv``), runs its blocks, and sends the
output to stage s + 1 (``isend``); the last stage computes the loss. Backward runs the other
way: stage s receives the gradient of its output from stage s + 1 and sends the gradient of its
input to stage s - 1. A schedule (``nb11.schedule``) says in which order each stage runs the
forward and backward passes of the m micro-batches.

First one step of each schedule is checked against one process on the whole batch (every rank
has the whole model: the same output and gradients, within fp32 rounding), and PyTorch's own
``torch.distributed.pipelining`` runs the same step on a copy of each stage, checked against the
written-out one (where this torch and backend allow it: ``nb11.api_skip``). Then every stage
times each of its passes in ``--repeats`` rounds, each round one step of every schedule and
micro-batch count in turn; then it measures its peak memory during one more step of each, and
what one micro-batch holds. Rank 0 writes it all to ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import time
from pathlib import Path

import torch
import torch.distributed as dist

from course_lib import check, memory, models, ranks
from course_lib.lessons import nb11

ATOL, RTOL = 1e-6, 1e-5  # fp32: the micro-batches' gradients add up in another order


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=512, help="features in and out of every block")
    p.add_argument("--layers", type=int, default=8, help="blocks Linear → GELU, split over the stages")
    p.add_argument("--batch", type=int, default=256, help="rows per step; every --micro must divide it")
    p.add_argument("--micro", type=int, nargs="+", default=[1, 2, 4, 8], help="micro-batch counts m")
    p.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b"], choices=sorted(nb11.SCHEDULES))
    p.add_argument("--repeats", type=int, default=5, help="timed steps of each schedule and m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fail-stage", type=int, default=-1, help="this stage raises in its first backward")
    p.add_argument("--out", default="build/dist/pipeline", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    a = p.parse_args()
    if bad := [m for m in a.micro if m < 1 or a.batch % m]:
        p.error(f"every --micro must divide --batch {a.batch}; these do not: {bad}")
    return a


class Clock:
    """Marks read as seconds on one clock that every stage on this machine shares: on the CPU,
    ``perf_counter`` (the system's monotonic clock, the same in every process); on a GPU, CUDA
    events (when the GPU got there, not when Python queued the work) placed on that clock from
    a start event recorded while the GPU was idle."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()  # nothing queued: the start event runs as it is recorded
            self.host0, self.t0 = time.perf_counter(), self.mark()

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def seconds(self, mark) -> float:
        if not self.cuda:
            return mark
        torch.cuda.synchronize()
        return self.host0 + self.t0.elapsed_time(mark) / 1e3


# >>> one step (notebook 11 shows these lines)
def step(part, x, y, kind, micro, stage, stages, clock, keep=False, fail=False):
    """Run one batch through this stage as `micro` micro-batches in the order of schedule `kind`;
    return the passes as (kind, micro-batch, start mark, end mark) and, on the last stage with
    `keep`, the model's output (its rows in batch order)."""
    last = stage == stages - 1
    xs, ys = x.chunk(micro), y.chunk(micro)  # (batch / m, width) each
    inputs, outputs, sends, passes, result = {}, {}, [], [], []
    for op, i in nb11.schedule(kind, stage, stages, micro):
        if op == "F":
            if stage == 0:
                inp = xs[i]
            else:
                inp = torch.empty_like(xs[i])
                dist.recv(inp, src=stage - 1)  # waits for the stage before: idle time
                inp.requires_grad_()
            t0 = clock.mark()
            out = part(inp)
            if last:
                result += [out.detach()] if keep else []
                out = nb11.micro_loss(out, ys[i], micro)  # its share of the batch's loss
            passes.append(("F", i, t0, clock.mark()))
            if not last:
                sends.append((dist.isend(out.detach(), dst=stage + 1), out))  # out lives until sent
            inputs[i], outputs[i] = inp, out
        else:
            grad = None
            if not last:
                grad = torch.empty_like(xs[i])
                dist.recv(grad, src=stage + 1)  # d(loss)/d(output) from the stage after
            if fail:
                raise RuntimeError(f"stage {stage} fails on purpose (--fail-stage {stage})")
            t0 = clock.mark()
            torch.autograd.backward(outputs.pop(i), grad)  # frees micro-batch i's activations
            passes.append(("B", i, t0, clock.mark()))
            inp = inputs.pop(i)
            if stage > 0:
                sends.append((dist.isend(inp.grad, dst=stage - 1), inp))
        sends = [(w, t) for w, t in sends if not w.is_completed()]  # let go of what has left
    for work, _ in sends:
        work.wait()
    return passes, result
# <<< one step


# >>> PyTorch's pipelining
def api_step(part, x, y, kind, micro, stage, stages, device):
    """The same step through PyTorch's torch.distributed.pipelining: a PipelineStage wraps this
    stage's blocks, and ScheduleGPipe or Schedule1F1B cuts the batch into `micro` micro-batches
    and runs the passes, sends and receives in its order. Returns the model's output on the
    last stage (the micro-batches' outputs in batch order), else None."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    Schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[kind]
    pp_stage = PipelineStage(part, stage_index=stage, num_stages=stages, device=device)
    # The loss carries its 1/m, as in step(). From torch 2.7 the schedule also divides the
    # gradients by m unless scale_grads=False; torch 2.6 has no such argument.
    keep_scale = {"scale_grads": False} if "scale_grads" in inspect.signature(Schedule).parameters else {}
    schedule = Schedule(pp_stage, n_microbatches=micro,
                        loss_fn=lambda out, target: nb11.micro_loss(out, target, micro), **keep_scale)
    if stage == 0:
        schedule.step(x)  # the first stage feeds the batch
    elif stage == stages - 1:
        return schedule.step(target=y)  # the last stage gets the targets, returns the output
    else:
        schedule.step()  # a middle stage only passes activations and gradients on
    return None
# <<< PyTorch's pipelining


def run(part, x, y, kind, micro, ctx, clock, keep=False, fail=False):
    """One step between barriers, the gradients zeroed in place first: its passes in seconds
    on the clock the stages share (the notebook counts from the step's first pass)."""
    for p in part.parameters():
        if p.grad is not None:
            p.grad.zero_()  # in place: no new gradient memory during the step
    dist.barrier()
    clock.start()
    passes, result = step(part, x, y, kind, micro, ctx.rank, ctx.world_size, clock, keep, fail)
    passes = [(op, i, clock.seconds(a), clock.seconds(b)) for op, i, a, b in passes]
    dist.barrier()
    return passes, result


def micro_memory(part, x, y, micro, stage, stages, device) -> dict[str, int]:
    """What one micro-batch costs this stage, measured as :func:`run`'s peaks are: the bytes its
    forward pass leaves live until its backward (the tensors autograd saves, the output; on a
    stage after the first, the received input too, which the step allocates), and the peak its
    backward pass adds on top (the gradients it computes before adding them into ``.grad``)."""
    inp = x.chunk(micro)[0].clone().requires_grad_(stage > 0)  # allocated before the readings
    with memory.track(device) as fwd:
        out = part(inp)
        if stage == stages - 1:
            out = nb11.micro_loss(out, y.chunk(micro)[0], micro)
    grad = None if stage == stages - 1 else torch.ones_like(out)  # stands for the received one
    with memory.track(device) as bwd:
        torch.autograd.backward(out, grad)
    return dict(forward_live=fwd.end_bytes + (inp.nbytes if stage > 0 else 0), backward_peak=bwd.peak_bytes)


def gather(obj):
    """Every rank's `obj`, in rank order (on every rank)."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup(timeout_s=a.timeout)  # init_process_group("gloo" or "nccl", timeout=...)
    stage, stages = ctx.rank, ctx.world_size
    model = models.gelu_stack(a.width, a.layers, a.seed)  # the whole model, the same on every rank
    bounds = nb11.bounds(a.layers, stages)
    part = nb11.split(model, stages, bounds)[stage].to(ctx.device)  # this stage's blocks
    x, y = (t.to(ctx.device) for t in nb11.batch(a.batch, a.width, a.seed))
    clock = Clock(ctx.device)
    ranks.print0(f"{stages} stages, backend {ctx.backend}, device {ctx.device}; blocks per stage "
                 f"{[b - e for e, b in zip(bounds, bounds[1:])]}")

    # ---- the same output and gradients as one process on the whole batch ----
    ref_out, ref_grads = nb11.reference(model.to(ctx.device), x, y)  # every rank has the model
    mine = slice(2 * bounds[stage], 2 * bounds[stage + 1])  # this stage's (weight, bias) pairs
    checks = []  # check.agreement rows: torch.allclose's test, with the largest |Δ| and its share
    for kind in a.schedules:
        m = max(a.micro)
        _, result = run(part, x, y, kind, m, ctx, clock, keep=True, fail=a.fail_stage == stage)
        got, want = [p.grad for p in part.parameters()], ref_grads[mine]
        if result:  # the last stage: its output too
            got, want = got + [torch.cat(result)], want + [ref_out]
        what = f"{kind}, {m} micro-batches, stage {stage}: {'gradients and output' if result else 'gradients'}"
        checks.append(nb11.require(check.agreement(f"{what} vs one process", got, want, atol=ATOL, rtol=RTOL)))

    # ---- PyTorch's own schedule on a copy of this stage: equal to the written-out step ----
    api, skipped = [], []  # agreement rows; a sentence for each schedule not run
    for kind in a.schedules:
        m, name = max(a.micro), nb11.API_SCHEDULES[kind]
        skip = nb11.api_skip(kind, m, stages, ctx.backend)  # the same on every stage
        if skip is not None:
            skipped.append(f"{name}: not run. {skip}")
        else:
            _, result = run(part, x, y, kind, m, ctx, clock, keep=True)  # written out, as above
            twin = copy.deepcopy(part)  # the same weights, gradients of its own
            for p in twin.parameters():
                p.grad = None
            dist.barrier()
            out = api_step(twin, x, y, kind, m, stage, stages, ctx.device)
            got, want = [q.grad for q in twin.parameters()], [p.grad for p in part.parameters()]
            if out is not None:  # the last stage: the output too
                got, want = got + [out], want + [torch.cat(result)]
            api.append(nb11.require(check.agreement(f"{name}, {m} micro-batches, torch {torch.__version__}: every "
                                                    f"stage's gradients and the output vs the written-out {kind}'s",
                                                    got, want, atol=ATOL, rtol=RTOL)))
        dist.barrier()

    # ---- timelines: every pass of every stage, --repeats rounds of every schedule and m ----
    configs = [(kind, m) for kind in a.schedules for m in a.micro]
    for kind, m in configs:
        run(part, x, y, kind, m, ctx, clock)  # warm-up
    timelines = []
    for r in range(a.repeats):  # in turns: a slower moment of the machine touches every config
        for kind, m in configs:
            passes, _ = run(part, x, y, kind, m, ctx, clock)
            timelines.append(dict(schedule=kind, micro=m, repeat=r, passes=passes))

    # ---- peak memory during one step, and what one micro-batch holds ----
    peaks = []
    for kind, m in configs:
        with memory.track(ctx.device) as reading:
            run(part, x, y, kind, m, ctx, clock)
        peaks.append(dict(schedule=kind, micro=m, stage=stage, peak=reading.peak_bytes))
    held = [dict(micro=m, stage=stage, **micro_memory(part, x, y, m, stage, stages, ctx.device))
            for m in a.micro]

    rows = gather(dict(checks=checks, api=api, timelines=timelines, peaks=peaks, held=held))
    results = dict(stages=stages, backend=ctx.backend, device=str(ctx.device), width=a.width,
                   layers=a.layers, batch=a.batch, micro=a.micro, schedules=a.schedules,
                   repeats=a.repeats, bounds=bounds, atol=ATOL, rtol=RTOL,
                   threads=torch.get_num_threads(),
                   torch=torch.__version__, checks=[c for row in rows for c in row["checks"]],
                   api=check.merge([row["api"] for row in rows]), api_skipped=skipped,
                   peak_bytes=[p for row in rows for p in row["peaks"]],
                   micro_bytes=[h for row in rows for h in row["held"]],
                   passes=[dict(stage=s, **t) for s, row in enumerate(rows) for t in row["timelines"]])
    ranks.print0(f"{len(results['checks']) + len(results['api'])} comparisons close, in results.json")
    ranks.write_json0(Path(a.out) / "results.json", results)
    ranks.teardown()


if __name__ == "__main__":
    main()
