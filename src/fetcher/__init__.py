"""Fetcher: extract data from registered databases and hand it over safely.

Importing the package opens nothing; see ``fetcher.bootstrap`` for the composition root.
"""

__version__ = "0.1.0"
