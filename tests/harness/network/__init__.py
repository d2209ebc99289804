"""Brokers in network namespaces behind rate-limited links, and the moves measured across them."""
