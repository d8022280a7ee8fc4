"""Runs of one job over time: ``compare`` (two or more runs side by side, and the CI gate) and
``history`` (every analyzed run, recorded in a local database)."""
