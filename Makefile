# Two commands do everything on a fresh clone: `make course` and `make test`.
# The first use creates .venv and installs the course into it.

PYTHON  ?= $(shell command -v python3.11 || command -v python3)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PROFILE ?= auto
OUT     ?= build
JOBS    ?= 2
# Containers and cloud GPU boxes often run as root; Jupyter refuses root without this flag.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test lab clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "the course needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e '.[test]'
	touch $@

## Execute every notebook headless (profile: PROFILE=auto|smoke|cpu|gpu) into build/
course: $(STAMP)
	$(BIN)/course check
	$(BIN)/course run --profile $(PROFILE) --out $(OUT)

## The whole test suite: unit tests, notebooks under papermill (smoke), nbval
test: $(STAMP)
	COURSE_PROFILE=smoke $(BIN)/python -m pytest -n $(JOBS) --dist loadscope \
	  --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	  tests notebooks

## Open JupyterLab on notebooks/ (localhost only, token-protected)
lab: $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name gpu-course --display-name "Python (GPU course)"
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ALLOW_ROOT)

clean:
	rm -rf $(OUT) .pytest_cache
