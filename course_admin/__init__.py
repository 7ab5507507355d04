"""Class administration: what the instructor's side of a class runs, never a notebook or the
sandboxed grader (they live in course_utils; this package imports from course_utils, never the
other way):

    exchange      nbgrader's exchange on the hub: a submission private to its learner, a collect
                  that takes each learner's own folder only (hub/classroom.py names these classes)
    grades        `bash course.sh grades`: several machines' grades.csv merged; a Moodle import CSV
"""
