"""nbgrader configuration for the course: where lessons live and how exercises are graded.

One nbgrader assignment per lesson: solutions/NN-topic/NN-topic.ipynb (instructor version) is
released to notebooks/NN-topic/NN-topic.ipynb (student version) by
`nbgrader generate_assignment NN-topic`. Run nbgrader from the repository root.
"""

import os
import warnings

from sqlalchemy.exc import SAWarning

from nbgrader.converters import GenerateAssignment

from course_utils.authoring.assignment import RunAllPastTests
from course_utils.exercises import STUB
from course_utils.grader.preprocessors import validate_like_grading

c = get_config()  # injected by traitlets when nbgrader loads this file

# nbgrader 0.9.6 builds a submission's rows through backrefs, which SQLAlchemy 2 no longer adds to
# the session by itself, and warns three times per submission; nbgrader then adds the submission
# explicitly (api.py, add_submission), so the rows are saved. Keep the instructor's log for what
# matters.
warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session",
                        category=SAWarning)

c.CourseDirectory.course_id = "backprop-autograd"
# this folder, wherever nbgrader runs
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# nbgrader's exchange (release_assignment, fetch, submit, collect): $COURSE_EXCHANGE, which `bash
# course.sh hub` gives every user of a class (hub/classroom.py), else exchange/ in this folder;
# never nbgrader's default, /usr/local/share/nbgrader/exchange, which a release run as root would
# make without a word.
c.Exchange.root = (os.environ.get("COURSE_EXCHANGE")
                  or os.path.join(c.CourseDirectory.root, "exchange"))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# Never copy caches or checkpoints into releases or submissions.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a learner sees in place of a solution. The error names the exercise cell, so a learner
# running the untouched notebook knows at once that it is "not attempted yet", not broken.
# the grader recognises the same line
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\n" + STUB}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Releases tag each test cell raises-exception, so Run All goes on past a failing test
# (course_utils.authoring.assignment); solutions/ stay untagged for nbval.
c.GenerateAssignment.preprocessors = [*GenerateAssignment.class_traits()["preprocessors"].default(),
                                      RunAllPastTests]

# Grading runs learners' code, so `nbgrader autograde` does not run it in nbgrader's own kernel:
# course_utils.grader.preprocessors.HardenedExecute takes the place of nbgrader's Execute step. It
# runs the learner's answer cells in a sandbox (no network, a read-only file system of its own
# without this folder; its own user when grading as root; resource limits always; see
# course_utils.grader.sandbox), with a time limit per cell and per notebook, and
# decides each test cell outside the sandbox: the hidden tests' expected values are computed from
# solutions/ in a separate process and never reach the learner's code. Outcomes become the test
# cells' outputs, which nbgrader scores as usual (an error output = no points).
from course_utils.grader.preprocessors import (HardenedExecute, HideTestsInFeedback,
                                               SanitizeSubmission, SaveReasons, SubmissionExporter)
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,
                                    DeduplicateIds, GetGrades, IgnorePattern, LimitOutput,
                                    OverwriteCells, OverwriteKernelspec, SaveAutoGrades)
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

# A submission is first rebuilt as the release plus the learner's answer cells, so forged, renamed
# or deleted cells cannot make nbgrader reject it (or count them).
# A file that is not a notebook is graded as an empty one, with the reason in the gradebook's
# comments.
c.Autograde.exporter_class = SubmissionExporter
c.Autograde.sanitize_preprocessors = [SanitizeSubmission, ClearOutput, DeduplicateIds,
                                      OverwriteKernelspec, OverwriteCells, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [HardenedExecute, IgnorePattern, ClearMetadataPreprocessor,
                                       LimitOutput, SaveAutoGrades, SaveReasons,
                                       AssignLatePenalties, CheckCellMetadata]
# Time limits count the learner's code's own time, not the wall clock of a busy machine; their
# defaults are course_utils.grader.worker.Limits' (docs/instructors.md lists every limit). Set here,
# above validate_like_grading(c) below, the limit per cell is Validate's too:
# c.HardenedExecute.cell_seconds = 60
# c.HardenedExecute.notebook_seconds = 600
# Where the machine cannot give the sandbox, grading stops; to accept resource limits only there:
# c.HardenedExecute.sandbox = "optional"
# Late work: nbgrader's own late-penalty plugin (nbgrader.plugins.LateSubmissionPlugin, run by
# AssignLatePenalties above). nbgrader 0.9 keeps a lesson's due date in the gradebook, not here:
# set it with
#     nbgrader db assignment add 01-circuits --duedate="2026-12-07 23:59:00 UTC"
# (or in Formgrader's Manage Assignments). A submission whose timestamp (written by `nbgrader
# submit`, kept by `nbgrader collect`) is after it is late; nbgrader's default method, "none", keeps
# its score, and "zero" takes it all. `nbgrader export` and `bash course.sh grades lms` give score
# less penalty. tests/grader/test_late_work.py uncomments this line and grades a late submission:
# c.LateSubmissionPlugin.penalty_method = "zero"
# Feedback shows each test's outcome, never the hidden tests' code.
c.GenerateFeedback.preprocessors = [GetGrades, HideTestsInFeedback, CSSHTMLHeaderPreprocessor]
# A learner's text is shown as text, never run, in the instructor's Formgrader (its submission view;
# on the hub a JupyterHub admin's own server) and on feedback pages. Both are nbconvert's
# HTMLExporter made with this file's config (nbgrader 0.9.6: formgrader.py's
# HTMLExporter(config=self.config); generate_feedback's exporter class). sanitize_html cleans
# outputs (HTML and markdown; JavaScript and widget outputs are dropped), but nbgrader's templates
# (formgrade, feedback) render markdown cells, written answers included, with markdown2html alone:
# SafeMarkdown replaces that filter, keeping only what markdown makes; the rest shows as text
# (course_utils.grader.reports.safe_html; tests/grader/test_reports.py,
# tests/browser/test_formgrader.py).
from course_utils.grader.reports import SafeMarkdown
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"markdown2html": SafeMarkdown}
# The lessons' math on those pages is MathML made with the page (SafeMarkdown:
# course_utils.grader.mathml), and the pages' mathjax() macro comes from
# course_utils/grader/templates/NAME/mathjax.html.j2, not from nbconvert (MathJax from a CDN):
# nothing is fetched, no script runs. nbconvert looks in the folders named after the template
# (formgrade, feedback) in these folders first; this file is read after the Formgrader sets its own
# list.
from course_utils.grader.mathml import PAGE_TEMPLATES
c.HTMLExporter.extra_template_basedirs = PAGE_TEMPLATES
# `nbgrader validate` and the Validate button run the student's own notebook in a normal kernel.
validate_like_grading(c)   # the grader's limit per cell: Validate stops a cell where grading would
# Huge outputs (a print in a loop) are cut, so feedback stays readable.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 60
# Formgrader's Manage Assignments page would dump this configuration (its debug view, on by
# default); the preprocessors and SafeMarkdown above are classes, so it logs "Formgrader config is
# not serializable" each time instead. The configuration is here, in this file.
c.FormgradeExtension.debug = False
