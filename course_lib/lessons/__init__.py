"""One module per notebook: ``nbNN.py`` holds notebook ``NN_*.ipynb``'s scaffolding (what its
cells call beyond plain PyTorch) and its exercise checks (``check_<exercise>``, built on
:mod:`course_lib.check`). A lesson imports core modules and earlier lessons only (a notebook
reuses what an earlier one introduced, never the reverse); tests/test_layout.py holds it to that.

nb01  GPU vs CPU: the exercise checks (FLOPs of a matmul, a copy's time)
nb02  first CNN: data-loading throughput (workers, pinned memory, channels_last)
nb03  mixed precision: formats, loss scaling, runs compared by precision
nb04  gradient accumulation: micro-batches vs one big batch, what breaks it
nb05  DataParallel: scatter, replicate, parallel_apply, gather on any device
nb06  DDP and FSDP2: the single-process reference, collectives checked, bytes per rank
nb07  attention: agreement with PyTorch, SDPA's kernels timed, the sweep over lengths, the toy task
nb08  Transformer training: the exercise checks (FLOPs per token, accumulation steps)
nb09  memory: the exercise checks (AdamW's state, bytes saved for backward)
nb10  compile and profile: the exercise checks (arithmetic intensity, a loop without syncs)
"""
