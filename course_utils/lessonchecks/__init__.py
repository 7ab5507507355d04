"""Each exercise's check, written once: what its visible test (Validate) and its hidden judge run.

One module per lesson, one `course_utils.judging.Check` per exercise (a probe that calls the
learner's code and a judge that names the mistake). A test cell only names its cases:

    CIRCUIT_GRADS.visible(circuit_grads, [(-2.0, 5.0, -4.0)], [(-4.0, -4.0, 3.0)])
    ### BEGIN HIDDEN TESTS
    POINTS = [...]                         # the hidden cases
    ### BEGIN EXPECTED
    def expect():                          # their right answers, computed by the instructor's code
        return [(z, z, x + y) for x, y, z in POINTS]
    ### END EXPECTED
    CIRCUIT_GRADS.hidden(circuit_grads, POINTS, expect)
    ### END HIDDEN TESTS

No right answer is computed here (learners have this package): expected values come from the
visible cell's literals or from the hidden cell's expect(). Known wrong answers, which name a
mistake in the feedback, are here.

    l01     circuits: circuit_grads, numerical_gradient, gate_backward, second_circuit_grads
"""
