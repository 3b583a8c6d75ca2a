"""The click CLI: options in, one Workspace call, output out. No business logic here."""
