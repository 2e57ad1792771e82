"""`helm test` check: dry-run create a GPU pod and see that the webhooks handled it.

The pod asks for `nvidia.com/gpu` in requests only. Kubernetes itself refuses that (an
extended resource needs limits), so an admitted dry-run pod proves the mutating webhook set the
limits; the injected tolerations are checked too. If the validating webhook refuses the pod
(e.g. no node in this cluster has a GPU and requireHardwareMatch is on), the refusal proves it
answered, and the mutation is checked by calling POST /mutate on the Service directly (as it is
when the test namespace is excluded from the webhooks, SERVICE_ONLY).
"""

import base64
import json
import os
import ssl
import sys
import urllib.request
import uuid

from kubernetes import client, config

NAMESPACE = os.environ["TEST_NAMESPACE"]
SERVICE = os.environ["WEBHOOK_URL"]
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "gpupolicy-helm-test", "namespace": NAMESPACE},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{
            "name": "cuda",
            "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "resources": {"requests": {"nvidia.com/gpu": "1"}},
        }],
    },
}


def mutated_ok(pod):
    containers = pod["spec"]["containers"]
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    keys = [t.get("key") for t in pod["spec"].get("tolerations") or []]
    print(f"limits: {limits}; toleration keys: {keys}")
    return str(limits.get("nvidia.com/gpu")) == "1"


def via_api_server():
    api = client.ApiClient()
    core = client.CoreV1Api(api)
    try:
        created = core.create_namespaced_pod(NAMESPACE, POD, dry_run="All")
    except client.ApiException as exc:
        message = exc.body or str(exc)
        if "gpupolicy.io" in message:
            print(f"validating webhook answered with a refusal: {message}")
            return None
        print(f"FAIL: dry-run create refused, not by gpupolicy: {message}")
        return False
    return mutated_ok(api.sanitize_for_serialization(created))


def via_service():
    ca = base64.b64decode(os.environ["CA_BUNDLE"]).decode() if os.environ.get("CA_BUNDLE") else None
    context = ssl.create_default_context(cafile=None if ca else "/certs/ca.crt", cadata=ca)
    uid = str(uuid.uuid4())
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": NAMESPACE, "operation": "CREATE", "object": POD,
            "userInfo": {"username": "helm-test"}, "dryRun": True,
        },
    }
    request = urllib.request.Request(
        SERVICE + "/mutate", data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        response = json.load(answer)["response"]
    ops = json.loads(base64.b64decode(response.get("patch") or "W10="))
    print(f"/mutate answered allowed={response.get('allowed')} with {len(ops)} patch ops")
    paths = [op["path"] for op in ops]
    print("\n".join(paths))
    return response.get("uid") == uid and any("limits" in p for p in paths)


def main():
    config.load_incluster_config()
    ok = None if os.environ.get("SERVICE_ONLY") else via_api_server()
    if ok is None:
        ok = via_service()
    print("PASS" if ok else "FAIL: the GPU pod was not mutated")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
