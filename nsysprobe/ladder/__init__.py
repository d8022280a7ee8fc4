"""The data-loading ladder: run each rung of ``workloads/`` plain and under nsys, and check
that each rung's analysis recommends the next (``run``)."""
