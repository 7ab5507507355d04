"""What `nbgrader generate_assignment` adds to a released lesson beyond nbgrader's own steps
(nbgrader_config.py appends it to GenerateAssignment's preprocessors).

RunAllPastTests tags every autograded test cell of the student version `raises-exception`, the
tag JupyterLab's Run All honours: a test that fails (an exercise not attempted yet, a wrong answer)
no longer stops the run, and the rest of the lesson still runs. Only releases are tagged:
solutions/ stay untagged, so nbval still fails on any exception in a solution's test cell, and
nbgrader still scores a failing test cell as failed (the tag changes no output).
"""

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution

TAG = "raises-exception"


class RunAllPastTests(NbGraderPreprocessor):
    """Tag autograded test cells (grade, not solution) `raises-exception`; other cells as they are."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell):
            tags = cell.metadata.setdefault("tags", [])
            if TAG not in tags:
                tags.append(TAG)
        return cell, resources
