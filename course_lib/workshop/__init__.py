"""The ``course`` command and the tools around the course; imports core and lessons freely.

cli       the ``course`` command: check, run, record, cohort, student, test-gpu
runner    executes notebooks headless (papermill) and collects their reports
catalog   the readiness table: what this machine can show of each notebook
cohort    a workshop's pre-flight: one machine's check report (JSON), many side by side
student   student copies: nbgrader replaces each solution with a stub
gpucheck  ``course test-gpu``: the gpu-marked tests and every notebook on a CUDA machine, in parts
"""
