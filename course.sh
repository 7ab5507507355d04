#!/usr/bin/env bash
# The course's one entry point. Every command first sets up what it needs (idempotent):
#   bash course.sh lab [jupyter args]   set up, then open the course in JupyterLab
#   bash course.sh test [pytest args]   set up, then run every test (unit, nbval, nbgrader)
#   bash course.sh setup                only set up: Graphviz, .venv, pinned packages, course_utils
#   bash course.sh release              re-execute solutions/ in place and regenerate notebooks/
#   bash course.sh bench                time every solution notebook and one autograde
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
VENV="$ROOT/.venv"
PYTHON=${PYTHON:-python3}

say() { printf '[course] %s\n' "$*" >&2; }

ensure_dot() {
  command -v dot >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "Graphviz's dot is missing: installing the Debian package graphviz"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
  else
    say "Graphviz's dot is missing. Install it, then run this again: sudo apt-get install graphviz | brew install graphviz | conda install -c conda-forge graphviz"
    exit 1
  fi
}

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' 2>/dev/null || {
      say "Python 3.10 or newer is needed ($PYTHON is $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"; exit 1; }
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall only when the pins or the package definition changed.
  local want have
  want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
  have=$(cat "$VENV/.installed" 2>/dev/null || true)
  if [ "$want" != "$have" ]; then
    say "installing the pinned packages into $VENV (first time: a few minutes)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
    echo "$want" > "$VENV/.installed"
  fi
  # nbgrader shells out to alembic, and jupyter finds its kernels and extensions through PATH.
  export PATH="$VENV/bin:$PATH"
}

setup() { ensure_dot; ensure_venv; }

cmd=${1:-help}; shift || true
case "$cmd" in
  setup)   setup ;;
  lab)     setup
           root_flag=(); [ "$(id -u)" = 0 ] && root_flag=(--allow-root)  # containers often run as root
           exec jupyter lab --ServerApp.root_dir="$ROOT/notebooks" "${root_flag[@]}" "$@" ;;
  test)    setup; exec python -m pytest "$@" ;;
  release) setup; exec python -m course_utils.release "$@" ;;
  bench)   setup; exec python benchmarks/notebook_times.py "$@" ;;
  *)       sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; [ "$cmd" = help ] ;;
esac
