"""One module per question asked of a trace; each a function of the loaded events."""
