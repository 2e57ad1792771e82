from tests.cluster.conftest import api_server, kubeconfig  # noqa: F401  (the fake API server)
