"""Stores: the catalog (truth), keyword and vector indexes (derived), git repositories."""
