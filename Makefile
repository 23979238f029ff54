# Two commands do everything on a fresh clone: `make course` and `make test`.
# The first use creates .venv and installs the course into it (the newest releases that
# pyproject.toml allows). `make test-oldest` does the same in .venv-oldest with the oldest
# supported set (constraints/oldest.txt); CI runs both.

PYTHON     ?= $(shell command -v python3.11 || command -v python3)
VENV       := .venv
OLDEST     := .venv-oldest
PROFILE    ?= auto
COURSE_OUT ?= build
ARGS       ?=
# make test-gpu: one part (PART=1..N, `course test-gpu --list`; empty: all in turn), its folder
PART       ?=
GPU_OUT    ?= gpu-check
STUDENT_OUT ?= $(COURSE_OUT)/student
LAB_DIR    ?= notebooks
JOBS       ?= 2
# Authoring: the notebooks NB (default: all), and nbstripout's settings for committing them
NB         ?= notebooks/[0-9][0-9]_*.ipynb
STRIP       = $(VENV)/bin/nbstripout --keep-id --keep-count --extra-keys "metadata.language_info metadata.jupytext"
# Containers and cloud GPU boxes often run as root; Jupyter refuses root without this flag.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test test-units test-commands test-notebooks test-oldest test-browser test-gpu lab student freeze check-stripped clean plumbing

# $(1): the virtual environment's folder; $(2): extra pip arguments (constraints).
# The course with EXTRAS, and jupyter-config/ (nbgrader's Jupyter extensions off): environment.yml
# installs the same (tests/test_packaging.py). pip byte-compiles every module as it installs
# (about 50 s here): with --no-compile and PYTHONDONTWRITEBYTECODE=1 (set in this workplace's
# environment) every process compiled torch's modules again at each import, and a CI run's unit
# tests ran at about half speed (tried and measured).
EXTRAS := test,instructor
# Python may cache the bytecode of what it imports (course_lib, the tests as pytest rewrites them):
# a workplace that sets PYTHONDONTWRITEBYTECODE makes every kernel, test worker and torchrun rank
# compile course_lib again at each import (about 0.15 s a process, hundreds of processes a test run).
unexport PYTHONDONTWRITEBYTECODE
define install
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "the course needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --progress-bar off -e '.[$(EXTRAS)]' ./jupyter-config $(2)
	touch $(1)/.installed
endef

# The unit tests in the venv $(1); $(2): more of the marker expression (the oldest set runs only
# the modules marked `versioned`, whose subject changes across the supported torch range, and
# leaves out the notebooks at their knobs' extremes and the printed commands: make test runs
# everything at the newest end, and nbval runs every notebook at both). The unit tests run with one intra-op thread per process
# (OMP_NUM_THREADS=1, inherited by the processes they start): two xdist workers took 390 s so,
# 488-509 s with 2 threads each, 505 s in one process.
define units
	$(1)/bin/python -c 'import torch, torchvision; print(f"testing with torch {torch.__version__}, torchvision {torchvision.__version__}")'
	OMP_NUM_THREADS=1 COURSE_PROFILE=smoke $(1)/bin/python -m pytest -n $(JOBS) --dist load --durations=15 -m "not browser $(strip $(2))" tests
endef
# The unit tests less the two slow kinds, which make test-commands runs: the notebooks at their
# knobs' extremes (06 at WORLD = 8 alone: 300 s of test time) and the printed commands run as
# printed (the torchrun lines: 230 s). Together about 7 of CI's minutes on 2 cores.
FAST := and not extremes and not printed

# Every notebook validated by nbval in the venv $(1) (smoke: every cell runs, the cells tagged
# nbval-check-output must print what they print in the committed notebook). nbval's other
# settings are in pyproject.toml; what the notebooks write goes to build/nbval/<venv>/, not make
# course's build/; `course agree` then compares what several of them measured (one run, one set
# of numbers), after a fresh start (no peaks or reports of an earlier run). The notebooks run
# one after another: two at once on 2 cores took 226 s against 125 s in turn (each kernel's
# threads and processes compete for the cores).
define notebooks
	rm -f build/nbval/$(1)/peaks.json build/nbval/$(1)/reports/*.json
	COURSE_PROFILE=smoke COURSE_BUILD_DIR=$(CURDIR)/build/nbval/$(1) $(1)/bin/python -m pytest --durations=5 \
	    --nbval-lax --nbval-cell-timeout=300 notebooks
	$(1)/bin/python -m course_lib agree build/nbval/$(1)
endef

$(VENV)/.installed: pyproject.toml jupyter-config/pyproject.toml
	$(call install,$(VENV),)

$(OLDEST)/.installed: pyproject.toml jupyter-config/pyproject.toml constraints/oldest.txt
	$(call install,$(OLDEST),-c constraints/oldest.txt)

## Execute every notebook headless (profile: PROFILE=auto|smoke|cpu|gpu) into COURSE_OUT (build/);
## ARGS: more of `course run`'s arguments, e.g. ARGS="08 -p TEXT_PATH my_corpus/ -p SEED 1"
course: $(VENV)/.installed
	$(VENV)/bin/course check
	$(VENV)/bin/course run --profile $(PROFILE) --out $(COURSE_OUT) $(ARGS)

## The whole test suite with the newest releases: make test-units, make test-commands, then
## make test-notebooks
test: $(VENV)/.installed
	$(call units,$(VENV),$(FAST))
	$(call units,$(VENV),and (extremes or printed))
	$(call notebooks,$(VENV))

## Its first part: the unit tests less the notebooks at their knobs' extremes and the printed
## commands (newest releases; CI runs it)
test-units: $(VENV)/.installed
	$(call units,$(VENV),$(FAST))

## Its second part: the notebooks at their knobs' extremes and every printed command run as
## printed (newest releases; sessions run it with make test before they land a change)
test-commands: $(VENV)/.installed
	$(call units,$(VENV),and (extremes or printed))

## Its third part: every notebook validated by nbval (smoke; newest releases)
test-notebooks: $(VENV)/.installed
	$(call notebooks,$(VENV))

## The same suite with the oldest supported releases (constraints/oldest.txt)
test-oldest: $(OLDEST)/.installed
	$(call units,$(OLDEST),and versioned $(FAST))
	$(call notebooks,$(OLDEST))

## On a CUDA machine: pytest -m gpu, every notebook in the gpu profile with --record
## (results/<device>.json), then every notebook again as on an 8 GiB card, all under GPU_OUT
## (gpu-check/) with summary.md. PART=N runs one part (each about 8 min on one H100 by
## estimate); without PART every part runs in turn. Without CUDA: one sentence, exit 2.
test-gpu: $(VENV)/.installed
	@$(VENV)/bin/course test-gpu $(if $(PART),--part $(PART)) --out $(GPU_OUT)

$(VENV)/.browser: $(VENV)/.installed
	$(VENV)/bin/python -m pip install --progress-bar off -e '.[$(EXTRAS),browser]'
	touch $@

## Every notebook's student copy run in JupyterLab in headless Chromium (Playwright; smoke):
## figures and widgets rendered, each unsolved exercise reported, no error. Serial: two
## notebooks at once on 2 cores took longer in all (201 s against 191 s, measured).
test-browser: $(VENV)/.browser
	@test -x /usr/bin/chromium || command -v chromium >/dev/null || { echo "make test-browser needs Chromium: install Debian's package with 'sudo apt-get install -y --no-install-recommends chromium'." >&2; exit 1; }
	COURSE_PROFILE=smoke $(VENV)/bin/python -m pytest --durations=15 -m browser tests/test_browser.py

## How much of the notebooks' code prints or reports, the checking conventions, the largest module
plumbing: $(VENV)/.installed
	$(VENV)/bin/python -m course_lib.workshop.plumbing $(NB)

## Open JupyterLab on LAB_DIR (notebooks/; build/student for the student copies), localhost
## only, token-protected. The notebooks' kernel, python3, is this environment's interpreter.
lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(LAB_DIR) $(ALLOW_ROOT)

## Student copies of every notebook in STUDENT_OUT (build/student/): nbgrader replaces each
## solution with a stub; the checks stay and report an unsolved exercise as "not done yet"
student: $(VENV)/.installed
	$(VENV)/bin/course student --out $(STUDENT_OUT)

## For course authors: execute NB under smoke in this environment's kernel (nbconvert), then
## strip every output but those of cells tagged keep_output, which nbval compares (nbstripout;
## the execution counts stay: nbval refuses a cell that has outputs but no count)
freeze: $(VENV)/.installed
	COURSE_PROFILE=smoke $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 $(NB)
	$(STRIP) $(NB)

## Fails when a notebook in NB carries anything nbstripout would strip (the tests run it)
check-stripped: $(VENV)/.installed
	$(STRIP) --verify $(NB)

clean:
	rm -rf $(COURSE_OUT) .pytest_cache
