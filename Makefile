# Two commands do everything on a fresh clone: `make course` and `make test`.
# The first use creates .venv and installs the course into it (the newest releases that
# pyproject.toml allows). `make test-oldest` does the same in .venv-oldest with the oldest
# supported set (constraints/oldest.txt); CI runs both.

PYTHON     ?= $(shell command -v python3.11 || command -v python3)
VENV       := .venv
OLDEST     := .venv-oldest
PROFILE    ?= auto
COURSE_OUT ?= build
JOBS       ?= 2
# Containers and cloud GPU boxes often run as root; Jupyter refuses root without this flag.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test test-oldest lab clean

# $(1): the virtual environment's folder; $(2): extra pip arguments (constraints)
define install
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "the course needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --progress-bar off -e '.[test]' $(2)
	touch $(1)/.installed
endef

# Unit tests and every notebook executed once under papermill (smoke), in the venv $(1)
define pytest
	$(1)/bin/python -c 'import torch, torchvision; print(f"testing with torch {torch.__version__}, torchvision {torchvision.__version__}")'
	COURSE_PROFILE=smoke $(1)/bin/python -m pytest -n $(JOBS) --dist load --durations=15 tests
endef

$(VENV)/.installed: pyproject.toml
	$(call install,$(VENV),)

$(OLDEST)/.installed: pyproject.toml constraints/oldest.txt
	$(call install,$(OLDEST),-c constraints/oldest.txt)

## Execute every notebook headless (profile: PROFILE=auto|smoke|cpu|gpu) into COURSE_OUT (build/)
course: $(VENV)/.installed
	$(VENV)/bin/course check
	$(VENV)/bin/course run --profile $(PROFILE) --out $(COURSE_OUT)

## The whole test suite with the newest releases: unit tests, every notebook once (smoke)
test: $(VENV)/.installed
	$(call pytest,$(VENV))

## The same suite with the oldest supported releases (constraints/oldest.txt)
test-oldest: $(OLDEST)/.installed
	$(call pytest,$(OLDEST))

## Open JupyterLab on notebooks/ (localhost only, token-protected)
lab: $(VENV)/.installed
	$(VENV)/bin/python -m ipykernel install --sys-prefix --name gpu-course --display-name "Python (GPU course)"
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ALLOW_ROOT)

clean:
	rm -rf $(COURSE_OUT) .pytest_cache
