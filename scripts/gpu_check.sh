#!/usr/bin/env bash
# One prepared run of the course's CUDA paths on a GPU machine (see shared/gpu-check.md).
#
#   bash scripts/gpu_check.sh            # on the GPU machine, from the repository root
#
# What it does, each step under its own `timeout` and all of it inside one overall deadline:
#   0. installs the wheels in .whl/ (those the machine lacks: nbval, ipykernel, graphviz, torchviz, ...)
#      into $SITE with pip --no-index, and, when `dot` is missing, a copied Graphviz from .whl/gv/;
#   1. prints python / torch / CUDA / NCCL versions, nvidia-smi -L and the course's doctor check;
#   2. python -m pytest -m cuda on the test files that hold cuda-marked tests; scripts/train_ddp.py under
#      torchrun with 1 rank (NCCL), 1 rank (gloo) and 2 ranks;
#   3. every solution notebook through nbval (--nbval-lax --nbval-current-env), in parallel lanes,
#      each cell's new outputs appended to $OUT/nb_outputs.txt by a small pytest plugin (nbval keeps
#      them in item.test_outputs but prints none), each notebook's pytest log to $OUT/nb_logs.txt;
#   4. if time is left: the notebooks again with CUDA hidden (the machine's torch on its CPU), into
#      $OUT/nb_outputs_cpu.txt and nb_logs_cpu.txt, to tell the torch version's differences from the GPU's;
#   5. if time is left: the other (non-slow) tests of the device-dependent test files.
# .whl/ is prepared beforehand where pip has a network (ignored through .git/info/exclude, sent with
# run(carry=[".whl"])): `pip download --only-binary=:all: --python-version 3.12 --implementation cp
# --platform manylinux_2_28_x86_64 (and the other manylinux tags) nbval==0.11.0 ipykernel==7.4.0 nbconvert==7.17.2
# nbclient==0.11.0 graphviz==0.21 ipywidgets==8.1.9`, plus torchviz==0.0.3 with --no-deps (never torch),
# less the packages the GPU image already has (attrs, coverage, jinja2, markupsafe, packaging, psutil,
# pygments, python-dateutil, typing-extensions); pytest 9.2.0 is carried to match the course's pin.
# .whl/gv/: Debian 12's dot (Graphviz 2.42), libgvc, libcgraph, libcdt, libpathplan, libltdl, libexpat
# and the core and dot-layout plugins, copied from /usr (1.4 MiB).
# Everything is teed to $OUT/log.txt. Knobs (environment): OUT, PYTHON, SITE, DEADLINE_S (overall
# seconds, default 400), T_TESTS, T_NB (seconds per step), NOTEBOOKS (space-separated notebook paths),
# LANES (how many notebooks run at once), SKIP_INSTALL=1 (use the current environment as it is).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
NBDIR=/tmp/gpu_check_nb
rm -rf "$NBDIR" && mkdir -p "$NBDIR"
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
START=$SECONDS
DEADLINE_S=${DEADLINE_S:-400}
T_TESTS=${T_TESTS:-150}
T_NB=${T_NB:-200}
LANES=${LANES:-5}

left() { echo $(( DEADLINE_S - (SECONDS - START) )); }
# step_timeout WANTED: WANTED, or what is left of the deadline less a margin, whichever is smaller
step_timeout() { local l; l=$(( $(left) - 10 )); (( l < $1 )) && echo $(( l > 5 ? l : 5 )) || echo "$1"; }
banner() { echo; echo "=================== $* (t=$(( SECONDS - START )) s, $(left) s left)"; }

# All of it runs in main, piped through tee (not `exec > >(tee)`: a bare `wait` would wait for that tee).
main() {
banner "0. install"
if [[ ${SKIP_INSTALL:-0} != 1 ]]; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/*.whl || echo "!!! pip install of .whl/ failed (rc $?)"
    else
        echo "!!! no .whl/ here: using the machine's packages only"
    fi
    export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$SITE/bin:$PATH"
    if ! command -v dot >/dev/null 2>&1 && [[ -x .whl/gv/bin/dot ]]; then
        # Graphviz 2.42 from .whl/gv (dot, its libraries, the core and dot-layout plugins: SVG output, no PNG).
        # A wrapper sets the library path for dot alone, so Python never sees the copied libraries.
        # (The program must stay named dot: Graphviz picks its layout engine by the name it runs under.)
        rm -rf /tmp/gv && cp -r .whl/gv /tmp/gv && mkdir /tmp/gv/real && mv /tmp/gv/bin/dot /tmp/gv/real/dot
        printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/gv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GVBINDIR=/tmp/gv/plugins exec /tmp/gv/real/dot "$@"\n' \
            >/tmp/gv/bin/dot
        chmod +x /tmp/gv/bin/dot
        export PATH="/tmp/gv/bin:$PATH"
        dot -c || echo "!!! dot -c failed"
    fi
else
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "dot: $(command -v dot || echo MISSING) $(dot -V 2>&1 | head -1)"
echo 'digraph{a->b}' | dot -Tsvg >/dev/null 2>&1 && echo "dot renders SVG" || echo "!!! dot cannot render SVG"

# The nbval plugin is loaded by name and pytest's plugin autoload is off: the machine's own pytest
# plugins (xdist, cov, benchmark, ...) are not loaded into the carried pytest.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
PLUG=/tmp/gpu_check_plugin
mkdir -p "$PLUG"
cat >"$PLUG/nbval_dump.py" <<'EOF'
"""Appends each nbval cell's new outputs (text only), its duration and its result to the file $NBVAL_DUMP."""
import os
import re
import time

import pytest

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(outs):
    parts = []
    for o in outs or []:
        kind = o.get("output_type")
        if kind == "stream":
            parts.append(o.get("text", ""))
        elif kind == "error":
            parts.append(f"ERROR {o.get('ename')}: {o.get('evalue')}\n" + ANSI.sub("", "\n".join(o.get("traceback", []))[-3000:]) + "\n")
        elif "data" in o:
            data = o["data"]
            if "text/plain" in data:
                parts.append(data["text/plain"] + "\n")
            other = sorted(k for k in data if k != "text/plain")
            if other:
                parts.append(f"[{', '.join(other)}]\n")
    return "".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = time.perf_counter()
    outcome = yield
    item._dump_seconds = time.perf_counter() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    path = os.environ.get("NBVAL_DUMP")
    if not path or call.when != "call" or not hasattr(item, "test_outputs"):
        return
    rep = outcome.get_result()
    src = item.cell.source.strip().splitlines()
    tags = item.cell.get("metadata", {}).get("tags", [])
    record = (f"--- {item.nodeid} [{rep.outcome}] {getattr(item, '_dump_seconds', 0):.1f} s tags={tags} "
              f"| {src[0][:100] if src else ''}\n" + _text(item.test_outputs))
    if rep.failed:
        record += "FAILURE: " + ANSI.sub("", str(rep.longrepr))[-4000:] + "\n"
    # One write() on an O_APPEND file: the lanes' records do not interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, record.encode("utf-8", "replace"))
    finally:
        os.close(fd)
EOF
export PYTHONPATH="$PYTHONPATH:$PLUG"

banner "1. versions"
timeout 60 "$PY" - <<'EOF'
import sys, importlib.metadata as md
print("python", sys.version.split()[0], sys.executable)
import torch, torch.distributed as dist
print("torch", torch.__version__, "| CUDA build", torch.version.cuda, "| cuda available", torch.cuda.is_available(),
      "| devices", torch.cuda.device_count())
if torch.cuda.is_available():
    print("device 0:", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0),
          f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB")
    print("cudnn", torch.backends.cudnn.version(), "| nccl available", dist.is_nccl_available(),
          "| nccl", ".".join(map(str, torch.cuda.nccl.version())) if dist.is_nccl_available() else "-")
for name in ["pytest", "nbval", "ipykernel", "jupyter_client", "nbformat", "IPython", "graphviz", "torchviz",
             "ipywidgets", "numpy", "matplotlib", "nbconvert"]:
    try:
        print(f"  {name} {md.version(name)}")
    except Exception as e:
        print(f"  {name} MISSING ({e})")
from course_utils.doctor import check_device
print("course doctor:", check_device())
EOF
nvidia-smi -L || echo "(no nvidia-smi)"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true
nproc

PYTEST=("$PY" -m pytest -p no:cacheprovider -o addopts= -p nbval.plugin)
CUDA_FILES=(tests/test_devices.py tests/test_memory.py tests/test_models.py tests/test_parallel.py tests/test_timing.py)

banner "2. pytest -m cuda"
t=$(step_timeout "$T_TESTS")
timeout -k 10 "$t" "${PYTEST[@]}" -m cuda -rA -v --durations=10 "${CUDA_FILES[@]}" \
    --junitxml="$OUT/cuda_tests.xml"
echo "pytest -m cuda: rc $?"

banner "2b. scripts/train_ddp.py under torchrun: 1 rank (NCCL by default), 1 rank gloo, 2 ranks (default backend)"
for args in "1" "1 --backend gloo" "2"; do
    read -r n rest <<<"$args"
    echo "--- torchrun --nproc_per_node=$n scripts/train_ddp.py --steps 3 $rest"
    timeout -k 5 "$(step_timeout 60)" "$PY" -m torch.distributed.run --standalone --nproc_per_node="$n" \
        scripts/train_ddp.py --steps 3 $rest 2>&1 | grep -v "^W.*OMP_NUM_THREADS\|^\*\*\*\*" | tail -15
    echo "rc ${PIPESTATUS[0]}"
done

if [[ -n ${NOTEBOOKS:-} ]]; then read -r -a NBS <<<"$NOTEBOOKS"; else NBS=(solutions/*/*.ipynb); fi
# The longest-looking first: LANES notebooks at a time, each one its own pytest and kernel.
mapfile -t NBS < <(for nb in "${NBS[@]}"; do echo "$(stat -c %s "$nb") $nb"; done | sort -rn | cut -d' ' -f2)
# run_nb TAG NOTEBOOK: nbval on one notebook; cell outputs to $OUT/nb_outputs$TAG.txt, its log to nb_logs$TAG.txt
run_nb() {
    local tag=$1 nb=$2 name t0 t rc
    name=$(basename "$nb" .ipynb)
    t=$(step_timeout "$T_NB")
    t0=$SECONDS
    NBVAL_DUMP="$OUT/nb_outputs$tag.txt" timeout -k 10 "$t" "${PYTEST[@]}" -p nbval_dump --nbval-lax \
        --nbval-current-env --nbval-cell-timeout=150 -rf -q "$nb" >"$NBDIR/$name$tag.log" 2>&1
    rc=$?
    echo "notebook $name$tag: rc $rc in $(( SECONDS - t0 )) s (timeout $t s): $(tail -1 "$NBDIR/$name$tag.log")"
    grep -E "^(FAILED|ERROR) " "$NBDIR/$name$tag.log" | cut -c1-300
    { flock 9; echo "################ $name$tag (rc $rc)"; cat "$NBDIR/$name$tag.log"; } 9>>"$OUT/nb_logs$tag.txt" \
        >>"$OUT/nb_logs$tag.txt"
}
# run_all TAG: every notebook, LANES at a time, while the deadline allows
run_all() {
    local pids=() nb
    for nb in "${NBS[@]}"; do
        if (( $(left) < 30 )); then echo "!!! no time left for $nb"; continue; fi
        run_nb "$1" "$nb" &
        pids+=($!)
        while (( $(jobs -rp | wc -l) >= LANES )); do sleep 1; done
    done
    (( ${#pids[@]} )) && wait "${pids[@]}"
}

banner "3. solution notebooks through nbval, on the GPU"
run_all ""
echo "CUDA lines the lessons printed:"
grep -i -E "cuda|allocat|peak" "$OUT/nb_outputs.txt" | grep -v "^---" | cut -c1-250 | head -60

# The same notebooks on this machine's CPU (CUDA hidden), with its torch: what differs from the saved
# outputs here is the torch version's doing; what differs from step 3 is the GPU's.
banner "4. the notebooks again with CUDA_VISIBLE_DEVICES= (this torch on the CPU)"
if (( $(left) > 120 )); then
    CUDA_VISIBLE_DEVICES= run_all "_cpu"
else
    echo "skipped: $(left) s left"
fi

banner "5. the rest of the device-dependent test files (not slow), on the GPU machine"
if (( $(left) > 60 )); then
    t=$(step_timeout 120)
    timeout -k 10 "$t" "${PYTEST[@]}" -m "not cuda and not slow" -q -rfE --maxfail=10 "${CUDA_FILES[@]}" 2>&1 | tail -30
    echo "other tests: rc $?"
else
    echo "skipped: $(left) s left"
fi
banner "done"
}

main 2>&1 | tee -a "$OUT/log.txt"
