"""A learner's own copies of the lessons, apart from nbgrader's release folder.

`bash course.sh lab` opens a workspace (default workspace/, or $COURSE_WORKSPACE), not notebooks/:
notebooks/ is nbgrader's release directory, which `nbgrader generate_assignment NAME --force`
deletes and writes again, so work saved there would be lost. Before JupyterLab starts,
fill(release, workspace) brings the workspace up to date without ever losing a learner's change:

- a notebook the workspace does not have yet is copied in (a new lesson, or one the learner
  deleted);
- a notebook the learner has not changed (it equals the release it was copied from, kept in
  workspace/.released/) is replaced by a newer release;
- a notebook the learner has changed is kept as it is, and a line says that a newer release exists
  and where it is.

    python -m course_utils.workspace RELEASE WORKSPACE
        # what course.sh lab runs; prints one line per change
"""

import filecmp
import shutil
import sys
from pathlib import Path

# the release each notebook was copied from (a hidden folder: JupyterLab does not list it)
KEPT = ".released"


def fill(release: Path, workspace: Path) -> list[str]:
    """Copy what is new in release/ (lesson folders of notebooks) into workspace/; return one line
    per thing done or left for the learner to decide."""
    lines, copied = [], []
    kept = workspace / KEPT
    for lesson in sorted(p for p in release.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for new in sorted(lesson.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in new.parts:
                continue
            rel = new.relative_to(release)
            mine, was = workspace / rel, kept / rel
            if was.exists() and filecmp.cmp(new, was, shallow=False):
                # this release is the one the learner has
                continue
            if not mine.exists():
                if rel.parts[0] not in copied:
                    copied.append(rel.parts[0])
            elif was.exists() and filecmp.cmp(mine, was, shallow=False):
                lines.append(f"updated {rel} to the new release (you had not changed it)")
            else:
                lines.append(f"{rel} has a new release in {new}; your copy in {mine} is kept "
                             "(rename yours to get the new one)")
                continue
            mine.parent.mkdir(parents=True, exist_ok=True)
            was.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(new, mine)
            shutil.copyfile(new, was)
    if copied:
        lines.insert(0, f"copied {len(copied)} lesson(s) into {workspace}: " + ", ".join(copied))
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m course_utils.workspace RELEASE WORKSPACE", file=sys.stderr)
        return 2
    release, workspace = Path(argv[0]), Path(argv[1])
    if not release.is_dir():
        print(f"no release folder at {release}", file=sys.stderr)
        return 2
    try:
        workspace.mkdir(parents=True, exist_ok=True)
        lines = fill(release, workspace)
    except OSError as e:
        print(f"cannot fill the workspace {workspace}: {e.strerror or e} "
              f"({e.filename or workspace})", file=sys.stderr)
        return 2
    for line in lines:
        print(f"[course] {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
