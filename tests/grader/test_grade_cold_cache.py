"""course_utils.grader.grade's reference run against a cold page cache (tests/grader/test_grade.py
has the rest).

Apart, and `alone`: it empties the whole machine's page cache (/proc/sys/vm/drop_caches), which
would make a test running beside it in the other worker read its files cold, and that test's reads
would change what this one measures (seen once in CI: 17 MB apart where 8 are allowed).
"""

import subprocess
from pathlib import Path

import pytest
from corpus._notebook import FIXTURE

from course_utils.grader import grade, lessonfile
from test_grade import LIMITS

pytestmark = [pytest.mark.slow, pytest.mark.alone]


def test_the_references_peaks_do_not_depend_on_a_cold_page_cache():
    """A reference started just after the page cache was emptied (by a neighbour, by the machine)
    would count the files it reads in its peaks and judge leniently; it runs again, warm."""
    from course_utils.grader.capabilities import measures_memory
    if not measures_memory():
        pytest.skip("needs the kernel's memory measurement: root, a memory cgroup")
    lesson = lessonfile.load_lesson(FIXTURE)
    warm = grade.Reference(lesson, LIMITS)
    warm.close()
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3")
    cold = grade.Reference(lesson, LIMITS)
    cold.close()
    for gid, peak in warm.peaks.items():
        assert abs(cold.peaks[gid] - peak) < 8 * 2 ** 20, \
            (f"{gid}: {cold.peaks[gid] / 2 ** 20:.0f} MB after the cache was emptied, "
             f"{peak / 2 ** 20:.0f} MB warm")
