"""Checks of the build stage: one small object per concern (``name``, ``codes``, ``run(context) -> Findings``)."""
