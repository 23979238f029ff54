"""One module per notebook: ``nbNN.py`` holds notebook ``NN_*.ipynb``'s scaffolding (what its
cells call beyond plain PyTorch) and its exercise checks (``check_<exercise>``, built on
:mod:`course_lib.check`; an exercise that one ``check.expect`` settles is checked in its cell). A lesson imports core modules and earlier lessons only (a notebook
reuses what an earlier one introduced, never the reverse); tests/test_layout.py holds it to that.

nb00  setup check: its tables and sentences as text, the exercise check (a matrix's bytes)
nb01  GPU vs CPU: the exercise checks (FLOPs of a matmul, a copy's time)
nb02  first CNN: data-loading throughput (workers, pinned memory), the short CIFAR-10/MNIST run
nb03  mixed precision: formats, loss scaling, runs compared by precision
nb04  gradient accumulation: micro-batches vs one big batch, what breaks it
nb05  DataParallel: scatter, replicate, parallel_apply, gather on one device; replicas on threads
nb06  DDP and FSDP2: the single-process reference, collectives checked, bytes per rank
nb07  attention: SDPA's kernels named and timed, the sweep over lengths (from lessons/nb07_seqlen.py), the toy
      task, the snippet, the words around each measurement
nb08  Transformer training: the words around each measurement (the long run, the reference's versions; MFU
      and utilisation from lessons/nb08_mfu.py, SDPA's account from lessons/nb08_attention.py, the compile's from
      lessons/nb08_compile.py), the checks of its claims (weight-decay groups, beating the unigram baseline, resume)
      and exercises
nb09  memory: the exercise checks (AdamW's state, bytes saved for backward), the closing answer from
      lessons/nb09_answer.py, the appendix's 08 step from lessons/nb09_beside08.py
nb10  compile and profile: the exercise checks (arithmetic intensity, a loop without syncs), the words
      around each measurement (section 4's from lessons/nb10_roofline.py, the reference GPU's from
      lessons/nb10_reference.py, 08's readings beside 10's from lessons/nb10_beside08.py, nb10_paced.py and nb10_account.py, each timed
      section's short summary from lessons/nb10_short.py, the closing answer from lessons/nb10_answer.py)
nb11  model parallelism: the model every script splits, pipeline schedules and their bubble (section 5's
      memory from lessons/nb11_memory.py)
nb12  inside the kernel: the online softmax and FlashAttention's tiles in plain PyTorch, Triton

Fifteen lesson modules serve one notebook without being its module, so that the notebook's own stays
its scaffolding (the notebook calls them through it):

nb03_formats    for nb03: what each 16-bit format keeps and loses, real casts, did a format run in a layer
nb07_seqlen     for nb07: attention's time and memory against sequence length, the growth exponents
nb08_attention  for nb08: whether one attention kernel explains the step's gap, attention alone summed over the step
nb08_compile    for nb08: a compile's break-even, and what its paired gain leaves open (a moved control, one set of turns)
nb08_mfu        for nb08: MFU and its same-turns check, utilisation against MFU, what sets two readings apart
nb09_answer     for nb09: the answer to its question, each line from the section that measured it
nb09_beside08   for nb09: 08's whole step timed beside its forward and backward, and beside 08's readings of it
nb10_account    for nb10: 08's attention alone, summed over the layers, beside the gap between 10's two steps and 08's
nb10_answer     for nb10: the answer to its question, a few short lines first, then the details behind each
nb10_beside08   for nb10: notebook 08's readings of the same GPT beside 10's, by the rule for two moments
nb10_paced      for nb10: 08's step read in several sets of turns, each set's pace probe taken out
nb10_reference  for nb10: the reference GPU's GPT, its waiting share without and with the profiler, its steps
nb10_roofline   for nb10: the roofline's numbers in words, each op against the roof of its memory level
nb10_short      for nb10: each timed section's 'in short:' lines, its other lines under 'details:'
nb11_memory     for nb11: each pipeline stage's peak memory against the prediction, and its misses
"""
