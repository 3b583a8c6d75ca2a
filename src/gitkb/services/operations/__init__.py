"""Looking at a running workspace: status, verify and repair, metrics, per-agent usage, backup and restore."""
