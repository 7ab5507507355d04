"""course_utils.setup: seeding makes runs repeatable; importing the package has no side effects."""

import subprocess
import sys

import pytest
import torch

import course_utils


def test_setup_seeds_torch():
    course_utils.setup(seed=3)
    a = torch.randn(4)
    course_utils.setup(seed=3)
    assert torch.equal(a, torch.randn(4))


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_setup_rejects_bad_seed(seed):
    with pytest.raises(ValueError, match="seed must be"):
        course_utils.setup(seed=seed)


def test_import_has_no_side_effects():
    # Importing the course's modules must not seed or change warning filters (torch and numpy
    # add filters of their own on import, so they are imported first).
    code = (
        "import torch, numpy, warnings, random; before = list(warnings.filters); "
        "state = random.getstate();"
        "import course_utils, course_utils.devices, course_utils.models, course_utils.graph,"
        " course_utils.checks, course_utils.circuits, course_utils.authoring.nbgrader_cli,"
        " course_utils.memory, course_utils.data, course_utils.doctor, course_utils.progress;"
        "assert warnings.filters == before, 'warning filters changed on import';"
        "assert random.getstate() == state, 'random state changed on import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
