#!/usr/bin/env bash
# Does the evaluation install (fmm-fast[cpu], and [gpu]) and the scale-out extra (fmm-fast[ray]) resolve to
# wheels only on each Python we claim?
# pip resolves for another Python without running it: --python-version picks the wheel tags, and
# --only-binary=:all: refuses any source build. Nothing is installed (--dry-run); needs PyPI access.
#
#   bench/check_python_versions.sh [PYTHON_VERSIONS...]       default: 3.11 3.12 3.13 3.14
#   EXTRAS="cpu gpu cpu,train" bench/check_python_versions.sh   which extras to resolve (default: cpu gpu ray)
#   FLOORS=1 bench/check_python_versions.sh                      every dependency at its floor (>=X as ==X):
#                                                                do the floors themselves ship the wheels?
#   (FLOORS is for the evaluation install: the train/hub floors do not fit one another, e.g. transformers 5
#   needs a newer tokenizers than the base floor, so pip picks newer ones there.)
#
# Prints one line per (version, extras): OK with the resolved versions of the key packages, or FAIL with
# pip's reason. Exit status 1 if any failed. The machine's pip configuration (local indexes, constraints)
# is ignored so that the answer is PyPI's.
set -uo pipefail
cd "$(dirname "$0")/.."
PIP="${PIP:-$(command -v pip || echo .venv/bin/pip)}"
# PyPI's answer, not this machine's: no PIP_* settings (find-links, constraints), no pip.conf
for variable in $(compgen -e | grep '^PIP_'); do unset "$variable"; done
export PIP_CONFIG_FILE=/dev/null
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(3.11 3.12 3.13 3.14)
read -r -a extras <<< "${EXTRAS:-cpu gpu ray}"
key='^(numpy|scipy|numba|onnx|onnxruntime|onnxruntime-gpu|tokenizers|matplotlib|torch|transformers|ray)-[0-9]'
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
constraints=()
if [ "${FLOORS:-0}" = 1 ]; then
  python3 - > "$target.floors" <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
for requirement in requirements:
    floor = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", requirement)
    if floor:
        print(f"{floor[1]}=={floor[2]}")
PY
  constraints=(--constraint "$target.floors")
  trap 'rm -rf "$target" "$target.floors"' EXIT
fi
status=0
for version in "${versions[@]}"; do
  for extra in "${extras[@]}"; do
    log=$("$PIP" install --dry-run --no-cache-dir --index-url https://pypi.org/simple \
          --python-version "$version" --only-binary=:all: --target "$target" "${constraints[@]}" ".[$extra]" 2>&1)
    if [ $? -eq 0 ]; then
      resolved=$(printf '%s\n' "$log" | sed -n 's/^Would install //p' | tr ' ' '\n' | grep -iE "$key" | tr '\n' ' ')
      echo "OK    python $version  fmm-fast[$extra]: $resolved"
    else
      echo "FAIL  python $version  fmm-fast[$extra]: $(printf '%s' "$log" | grep -E 'ERROR' | head -2 | tr '\n' ' ')"
      status=1
    fi
  done
done
exit $status
