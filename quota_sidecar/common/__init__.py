"""Shared below every stage and by the aggregator: value and record types, the rules' vocabulary, errors, deadline."""
