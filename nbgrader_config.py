"""nbgrader configuration for the course: where lessons live and how exercises are graded.

One nbgrader assignment per lesson: solutions/NN-topic/NN-topic.ipynb (instructor version) is
released to notebooks/NN-topic/NN-topic.ipynb (student version) by
`nbgrader generate_assignment NN-topic`. Run nbgrader from the repository root.
"""

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "backprop-autograd"
c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# Never copy caches or checkpoints into releases or submissions.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a learner sees in place of a solution. The error names the exercise cell, so a learner
# running the untouched notebook knows at once that it is "not attempted yet", not broken.
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("Exercise not attempted yet: replace this line with your code")'
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Grading runs learners' code: every cell gets a time limit, and the kernel is interrupted
# (not left running) when it passes it. Lessons run in seconds; 60 s per cell is generous.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.Execute.allow_errors = True
# Huge outputs (a print in a loop) are cut, so feedback stays readable.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 60
