"""polylite: fast factorization machines and polynomial networks for sparse data."""
__version__ = "0.1.0.dev0"
