"""What every stage shares and no stage owns: names made safe to show (``safetext``), files
opened with bounds (``files``), the one output writer (``writer``), progress lines
(``progress``) and package exports loaded on first use (``lazy``)."""
