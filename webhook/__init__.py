"""The edges of gpupolicy: HTTP server, CLI, cluster client, reports, certificates."""
