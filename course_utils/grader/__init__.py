"""The sandboxed grader: a submission's answers run in a sandbox, each hidden test judged outside
it.

No notebook imports from here (docs/grading-design.md). From the bottom up (an import only
ever points to a module above it in this list):

    cgroups       a memory, process and CPU cgroup for one worker (root)
    peakmemory    a cgroup's memory high-water mark, measured by the kernel
    workerclock   a worker's own time: the wall clock less the time the machine kept all its
                  threads from running
    sandbox       the namespaces and read-only file system a learner's worker runs in
    capabilities  what this machine gives: which sandbox, a memory peak, a CPU share; the warning
    protocol      the wire format: observations as strict, bounded JSON
    feedback      what of a message may reach a learner: safe text, bounded numbers, no hidden
                  source
    lessonfile    the instructor's notebook and a submission's answer cells, as the grader
                  reads them
    cellrunner    the worker's process: runs cells, sends observations (learner), judges
                  them (reference)
    worker        Limits and Worker: that process started in its sandbox, limited, timed,
                  always killed
    rootworker    a learner's Worker run as root through the hub's sudo rule, for a grader that
                  is not root
    pagecache     pins the shared files' page cache, so no neighbour moves a memory peak
    grade         Reference and grade_answers: one submission graded, every zero with a reason
    review        a static read of the answers that names, for the instructor, code reaching outside
    submission    one submission's bytes -> its Result: graded, reviewed, written answers copied
    preprocessors nbgrader's preprocessors for nbgrader_config.py (`nbgrader autograde` uses grade)
    reports       grades.csv and feedback pages, written without ever losing earlier results
    mathml        the math of feedback pages and the Formgrader as MathML: no script, nothing
                  fetched
    cluster       `grade ... --cluster` and `grade-worker`: the folder graded on a Dask cluster's
                  grading workers
    gradefolder   `bash course.sh grade`: a folder of submissions -> grades.csv + feedback
    autograde_lesson  the instructor's server: every submission of a lesson autograded in one press
    freshgradebook    the instructor's server: Formgrader reads the gradebook as it is now, at
                      each request
"""
