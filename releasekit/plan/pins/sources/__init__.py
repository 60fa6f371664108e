"""One module per release-input format, each with a ``SOURCE`` (a ``PinSource``) that ``registry.py`` lists."""
