"""The report: ``analyze`` runs capture -> trace -> analyses -> diagnosis into one ``Report``
(``analyze``), and ``metrics`` reads the headline figures every consumer compares (compare,
history, many ranks, the ladder) from a ``Report`` or from its saved JSON form."""
