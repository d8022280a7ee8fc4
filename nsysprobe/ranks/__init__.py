"""Many reports of one run, one per rank, analyzed on Dask with a time and memory limit each,
and compared across ranks to find the straggler and its cause (``many``)."""
