"""Rebuild what is generated from solutions/:
`python -m course_utils.authoring.release [LESSON ...]`.

For each lesson (all by default): run the solution notebook top to bottom in a fresh kernel and
save its outputs in place (nbval compares the tagged ones in CI, readers see the figures), then
run `nbgrader generate_assignment LESSON --force --no-db` at the repository root, which writes the
student version to notebooks/LESSON/. Run it from the repository root after editing a solution
notebook (`bash course.sh release` does). `--no-execute` only regenerates notebooks/.
"""

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_utils.authoring.nbgrader_cli import lessons, nbgrader, notebook_path


def execute_in_place(path: Path, timeout: int = 300) -> float:
    """Run the notebook at path in a fresh kernel (cwd: its folder), save it; return seconds
    taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # No timing metadata and no widget state: they change on every run and would only add noise.
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}},
                   record_timing=False, store_widget_state=False).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("lessons", nargs="*", help="lesson ids such as 01-circuits (default: all)")
    parser.add_argument("--no-execute", action="store_true", help="only regenerate notebooks/")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if not (root / "nbgrader_config.py").exists():
        parser.error(f"run this from the repository root (no nbgrader_config.py in {root})")
    known = lessons(root)
    unknown = sorted(set(args.lessons) - set(known))
    if unknown:
        parser.error(f"unknown lessons {unknown}; the course has {known}")
    for name in args.lessons or known:
        if not args.no_execute:
            seconds = execute_in_place(notebook_path(root, "solutions", name))
            print(f"{name}: executed in {seconds:.1f} s", file=sys.stderr)
        # --no-db: regenerating the release needs no gradebook (instructors' own runs make theirs).
        nbgrader("generate_assignment", name, "--force", "--no-db", cwd=root)
        print(f"{name}: released to {notebook_path(root, 'notebooks', name).relative_to(root)}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
