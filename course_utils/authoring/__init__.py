"""Tools for course authors, not for learners and not part of the grader.

    nbgrader_cli  nbgrader driven through its real command line and gradebook, for tests and benchmarks
    release       `bash course.sh release`: re-run solutions/, regenerate notebooks/ with nbgrader
"""
