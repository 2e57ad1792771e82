"""cluster: see webhook/__init__.py for the layout."""
