"""What `nbgrader generate_assignment` adds to a released lesson beyond nbgrader's own steps
(nbgrader_config.py appends it to GenerateAssignment's preprocessors).

RunAllPastTests tags every autograded test cell of the student version `raises-exception`, the
tag nbclient and nbconvert honour: a test that fails (an exercise not attempted yet, a wrong answer)
does not stop their run of the lesson. JupyterLab 4.6's Run All stops at any failing cell, tagged or
not; there a test cell of an exercise not attempted yet prints one line instead of failing
(course_utils.judging.Check.visible), so Run All goes on. Only releases are tagged:
solutions/ stay untagged, so nbval still fails on any exception in a solution's test cell, and
nbgrader still scores a failing test cell as failed (the tag changes no output).
"""

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution

TAG = "raises-exception"


class RunAllPastTests(NbGraderPreprocessor):
    """Tag autograded test cells (grade, not solution) `raises-exception`; other cells as they
    are."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell):
            tags = cell.metadata.setdefault("tags", [])
            if TAG not in tags:
                tags.append(TAG)
        return cell, resources
