"""Configuration: the keys, server.properties-style and JSON files, parsed and validated once into frozen values."""
