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
    l02     local gradients: neuron_grads, topological_order, the Value's ops, backward
    l03     PyTorch autograd: the graph walk, saved tensors predicted, weight decay, a custom
            Function
    l04     backprop through an MLP: gradient shapes, mlp_backward, the training memory budget
    l05     gradient accumulation: micro-batch weights, the accumulation loop, the plan
    l06     checkpointing: checkpoint_peak_bytes, checkpointed_forward, best_segments
    l07     second derivatives: hvp, newton_step, has_second_order_graph
    l08     partitioning: bubble_fraction, min_microbatches, balance_stages, average_gradients
    l09     a bigger batch: loss_scale, bf16_pack_unpack, zero_bytes_per_rank, sharded_sgd_step
    l10     fit it yourself: block_activation_bytes, fit_step (a batch under a memory budget)
    l11     splitting layers: tp_mlp, one_f_one_b, overlapped_allreduce
    workers what the checks that run an exercise in worker processes share (lessons 08, 09, 11)

A lesson whose probes start processes says so with `PROBES_START_PROCESSES = True` in its module
(l08, l09 and l11: their exercises run in process groups). The grader forbids process creation, from
outside the learner's process, while any other lesson's test cell runs
(course_utils.grader.lessonfile reads the constant; a lesson without it, or without a module, is
forbidden): a rule checked inside the learner's process, such as l04's "without autograd" or l03's
"predict, don't measure", would otherwise fall to a child process that does the forbidden work and
sends back the result. An exercise whose rule is checked in the probe's own thread is named in
`JUDGED_IN_ONE_THREAD` (l03's predict_saved): its test is refused while a thread the learner's code
started in an earlier cell still runs.
"""
