"""The edges of gpupolicy, around the pure core in policies/:

- inputs/   files and cluster objects -> the engine's Context (one hardened YAML reader, one
            Context builder, the server's live State)
- http/     the webhook: Flask app, AdmissionReview in and out, gunicorn worker, metrics, logs
- cluster/  the Kubernetes client: watch caches for serve, paged lists for audit and explain;
            its kind tables, errors and file source load no client (offline runs never do)
- output/   findings and their formats (text, json, sarif, junit, github, reports), lint --fix
- commands/ one thin module per `gpupolicy` command; none imports another
- cli.py    the dispatcher;  certs.py  the CA and serving certificates
"""
