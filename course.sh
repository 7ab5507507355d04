#!/usr/bin/env bash
# The course's one entry point. Every command first sets up what it needs (idempotent):
#   bash course.sh lab [jupyter args]   set up, then open the course in JupyterLab (as a learner, in workspace/)
#   bash course.sh test [pytest args]   set up, then run every test (unit, nbval, nbgrader, browser), two files at a time
#   bash course.sh setup                only set up: Graphviz, .venv, pinned packages, course_utils
#   bash course.sh doctor               check the set-up; print a one-line fix for what is missing
#   bash course.sh release              re-execute solutions/ in place and regenerate notebooks/
#   bash course.sh bench                time every solution notebook and one autograde
#   bash course.sh grade LESSON FOLDER  grade a folder of submissions in sandboxes: grades.csv + feedback
#   bash course.sh grade-worker --scheduler tls://HOST:8786   as root: grade for `grade ... --cluster` (a Dask cluster)
#   bash course.sh grades merge|lms ... merge grades.csv from several machines; a Moodle import CSV
#   bash course.sh hub [--roster CSV] [--instructor NAME] [--tas A,B] [--port N]   as root: accounts, then JupyterHub
# COURSE_ROLE=instructor bash course.sh lab   opens the repository with nbgrader's instructor tools
set -euo pipefail
CALLER_DIR=$PWD   # `grade` resolves the caller's relative paths here
cd "$(dirname "$0")"
ROOT=$PWD
VENV="$ROOT/.venv"
# The Python .venv is made from: $PYTHON when set; else, as root, the system's /usr/bin/python3 when it
# is 3.10+ and makes venvs, because every account of a class hub (`hub`) runs .venv and a Python in
# root's home (pyenv's) is not theirs to run; else python3.
SYSTEM_PYTHON=/usr/bin/python3
PYTHON_SET=${PYTHON:+1}
if [ -z "$PYTHON_SET" ]; then
  PYTHON=python3
  if [ "$(id -u)" = 0 ] && "$SYSTEM_PYTHON" -c 'import sys, ensurepip; assert sys.version_info >= (3, 10)' 2>/dev/null; then
    PYTHON=$SYSTEM_PYTHON
  fi
fi

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
    say "creating $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
    if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
      rm -rf "$VENV"
      [ "$PYTHON" = "$SYSTEM_PYTHON" ] && [ -z "$PYTHON_SET" ] && command -v python3 >/dev/null &&
        { say "$SYSTEM_PYTHON makes no venv (Debian: apt-get install python3-venv): using python3"; PYTHON=python3; PYTHON_SET=1; ensure_venv; return; }
      say "$PYTHON cannot make a venv (Debian: apt-get install python3-venv), or set PYTHON=/path/to/python3.11"; exit 1
    fi
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

# What learners do not need to see in JupyterLab: nbgrader's instructor tools (Create Assignment,
# Formgrader, the course list and the Nbgrader menu that leads to them; Validate stays) and
# JupyterLab's prompt about fetching Jupyter news. Disabled in .venv for everyone (sys_prefix);
# COURSE_ROLE=instructor puts $INSTRUCTOR_CONFIG, which enables them again, first in
# JUPYTER_CONFIG_PATH.
INSTRUCTOR_PLUGINS=(@jupyter/nbgrader:create-assignment @jupyter/nbgrader:formgrader
                    @jupyter/nbgrader:course-list @jupyter/nbgrader:menu)
# The instructor's server extensions: Formgrader, the course's "autograde a whole lesson" page
# (course_utils/grader/autograde_lesson.py) beside it, and Formgrader reading the gradebook afresh at each
# request (course_utils/grader/freshgradebook.py: several graders, or a terminal's autograde, change it).
INSTRUCTOR_SERVER_EXTENSIONS=(nbgrader.server_extensions.formgrader course_utils.grader.autograde_lesson
                              course_utils.grader.freshgradebook)
QUIET_PLUGINS=(@jupyterlab/apputils-extension:announcements)
INSTRUCTOR_CONFIG="$VENV/etc/jupyter-instructor"

ensure_learner_view() {
  local want have
  want=$(printf '%s\n' "${INSTRUCTOR_PLUGINS[@]}" "${INSTRUCTOR_SERVER_EXTENSIONS[@]}" "${QUIET_PLUGINS[@]}" | sha256sum | cut -d' ' -f1)
  have=$(cat "$VENV/.learner-view" 2>/dev/null || true)
  [ "$want" = "$have" ] && [ -f "$VENV/etc/jupyter/labconfig/page_config.json" ] && return 0
  say "hiding nbgrader's instructor tools and JupyterLab's news prompt from learners"
  # Locked too, so that JupyterLab's plugin manager does not offer to enable them again.
  jupyter labextension disable --level=sys_prefix "${INSTRUCTOR_PLUGINS[@]}" "${QUIET_PLUGINS[@]}" 2>/dev/null
  jupyter labextension lock --level=sys_prefix "${INSTRUCTOR_PLUGINS[@]}" "${QUIET_PLUGINS[@]}" 2>/dev/null
  local extension
  for extension in "${INSTRUCTOR_SERVER_EXTENSIONS[@]}"; do
    jupyter server extension disable --sys-prefix "$extension" >/dev/null 2>&1
  done
  local plugins; plugins=$(printf '"%s": false, ' "${INSTRUCTOR_PLUGINS[@]}" | sed 's/, $//')
  mkdir -p "$INSTRUCTOR_CONFIG/labconfig"
  printf '{"disabledExtensions": {%s}, "lockedExtensions": {%s}}\n' "$plugins" "$plugins" \
    > "$INSTRUCTOR_CONFIG/labconfig/page_config.json"
  local extensions; extensions=$(printf '"%s": true, ' "${INSTRUCTOR_SERVER_EXTENSIONS[@]}" | sed 's/, $//')
  printf '{"ServerApp": {"jpserver_extensions": {%s}}}\n' "$extensions" \
    > "$INSTRUCTOR_CONFIG/jupyter_server_config.json"
  echo "$want" > "$VENV/.learner-view"
}

# The browser tests (tests/browser) drive Debian's Chromium; without one they skip, saying why.
ensure_browser() {
  { command -v chromium || command -v chromium-browser; } >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "Chromium is missing (the browser tests need it): installing the Debian package chromium"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-liberation >/dev/null; } ||
      say "could not install chromium: the browser tests will be skipped"
  else
    say "no Chromium: the browser tests will be skipped (sudo apt-get install chromium to run them)"
  fi
}

setup() { ensure_dot; ensure_venv; ensure_learner_view; }

# `hub` serves every user as their own Unix account, so it needs root (hub/classroom.py).
need_root() {
  [ "$(id -u)" = 0 ] && return 0
  say "bash course.sh hub creates Unix accounts and runs each user's JupyterLab as that user: run it as root (sudo bash course.sh hub)"
  exit 1
}

# The hub's proxy (configurable-http-proxy) is a Node.js program, installed by hub/classroom.py with npm.
ensure_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    say "npm is missing (the hub's proxy needs Node.js): installing the Debian packages nodejs npm"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    say "npm is missing (the hub's proxy needs Node.js): install nodejs and npm, then run this again"; exit 1
  fi
}

# The instructor grades on the hub with the full sandbox through one sudo rule (hub/classroom.py, allow_full_sandbox).
ensure_sudo() {
  command -v sudo >/dev/null 2>&1 && command -v visudo >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    say "sudo is missing (the instructor grades with the full sandbox through it): installing the Debian package sudo"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null
  else
    say "sudo is missing (the instructor grades with the full sandbox through it): install sudo, then run this again"; exit 1
  fi
}

cmd=${1:-help}; shift || true
case "$cmd" in
  setup)   setup ;;
  lab)     setup
           root_flag=(); [ "$(id -u)" = 0 ] && root_flag=(--allow-root)  # containers often run as root
           case "${COURSE_ROLE:-learner}" in
             learner)    # the learner's own copies (course_utils/workspace.py): nbgrader rewrites notebooks/
                         lab_root=${COURSE_WORKSPACE:-$ROOT/workspace}; start_here=00-start-here/00-start-here.ipynb
                         case "$lab_root" in /*) ;; *) lab_root="$CALLER_DIR/$lab_root" ;; esac
                         python -m course_utils.workspace "$ROOT/notebooks" "$lab_root" ;;
             instructor) lab_root="$ROOT"; start_here=notebooks/00-start-here/00-start-here.ipynb  # + solutions/, the Formgrader
                         export JUPYTER_CONFIG_PATH="$INSTRUCTOR_CONFIG${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}" ;;
             *)          say "COURSE_ROLE must be learner or instructor, not '$COURSE_ROLE'"; exit 2 ;;
           esac
           # the browser opens on the start-here page, not on the Launcher
           exec jupyter lab --ServerApp.root_dir="$lab_root" --LabApp.default_url="/lab/tree/$start_here" \
                "${root_flag[@]}" "$@" ;;
  test)    setup; ensure_browser
           # the hub's grading rule is tested (tests/grader/test_rootworker.py, tests/hub) where root can make it
           if [ "$(id -u)" = 0 ]; then (ensure_sudo) || say "could not install sudo: the hub's grading rule will not be tested"; fi
           # two test files at a time, each in one pytest-xdist worker (conftest.py: LANES); `-n 0` after it: one process
           exec python -m pytest -n 2 "$@" ;;
  doctor)  ensure_venv; exec python -m course_utils.doctor ;;
  release) setup; exec python -m course_utils.authoring.release "$@" ;;
  bench)   setup; exec python benchmarks/notebook_times.py "$@" ;;
  grade)   setup; cd "$CALLER_DIR"; exec python -m course_utils.grader.gradefolder --course "$ROOT" "$@" ;;
  grade-worker) setup; exec python -m course_utils.grader.cluster "$@" ;;
  grades)  setup; cd "$CALLER_DIR"; exec python -m course_admin.grades "$@" ;;
  hub)     need_root; setup; ensure_npm; ensure_sudo; cd "$CALLER_DIR"; exec python "$ROOT/hub/classroom.py" "$@" ;;
  *)       sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; [ "$cmd" = help ] ;;
esac
