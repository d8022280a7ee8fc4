"""Rung 5: the copy/compute overlap of rung 4, packaged as a prefetching iterator.

``CUDAPrefetcher`` (the shape of NVIDIA apex's ``data_prefetcher``) wraps the loader, so the
training loop is unchanged and computes on the default stream.
"""

if __package__:  # python -m nsysprobe.workloads.prefetch
    from .ladder import main
else:  # python workloads/prefetch.py
    from ladder import main

if __name__ == "__main__":
    main("prefetch")
