"""The pure core of gpupolicy: one review() decides for the webhook, the linter and the audit.

No I/O, no Flask, no Kubernetes client, no printing here: the edges live in `webhook/`.
"""
