"""Diagnosis: the analyses' evidence -> ranked recommendations, each with its reason, its
evidence and its expected gain (``rules``)."""
