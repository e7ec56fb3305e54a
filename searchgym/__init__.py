"""searchgym: Gymnasium environments for search-augmented question answering."""

__version__ = "0.1.0"
