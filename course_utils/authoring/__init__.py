"""Tools for course authors, not for learners and not part of the grader.

    nbgrader_cli  nbgrader driven through its real command line and gradebook, for tests and
                  benchmarks
    assignment    what generate_assignment adds to a release: test cells tagged for Run All
    release       `bash course.sh release`: re-run solutions/, regenerate notebooks/ with nbgrader
    once          a test fixture's work per lesson, done once, a failure included (reported once in
                  full)
    wronganswers  a lesson's wrong and second correct answers: which the grader grades, the rest
                  judged in one kernel
"""
