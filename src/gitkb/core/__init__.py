"""Core: models, errors, chunking, text loading, embedders, configuration. Imports nothing above it."""
