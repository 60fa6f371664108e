"""releasekit: a release image as a function of public commits."""

__version__ = "0.1.0"
