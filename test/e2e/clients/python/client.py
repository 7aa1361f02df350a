"""Drives a corekube server with the official Python client (kubernetes).

Loads the kubeconfig `corekube up` wrote as it is (its CA verified, its
client certificate presented; no insecure skip).
Usage: python3 client.py KUBECONFIG NAMESPACE POD
Prints one JSON object with what the server answered; the Go test
(test/e2e/clients_test.go) checks it. Any failure exits non-zero with the
traceback on stderr.
"""
import json
import sys

import kubernetes
from kubernetes import client, config, watch


def main():
    if len(sys.argv) != 4:
        print("usage: python3 client.py KUBECONFIG NAMESPACE POD", file=sys.stderr)
        return 2
    kubeconfig, namespace, pod_name = sys.argv[1:]

    config.load_kube_config(config_file=kubeconfig)
    cfg = client.Configuration.get_default_copy()
    if not cfg.verify_ssl:
        raise RuntimeError("the kubeconfig turned TLS verification off")
    core = client.CoreV1Api()
    result = {"clientVersion": kubernetes.__version__, "server": cfg.host}

    result["namespaces"] = [ns.metadata.name for ns in core.list_namespace().items]

    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=pod_name, labels={"client": "python"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]),
    )
    created = core.create_namespaced_pod(namespace, body)
    result["created"] = {"name": created.metadata.name, "uid": created.metadata.uid}

    read = core.read_namespaced_pod(pod_name, namespace)
    result["read"] = {
        "name": read.metadata.name,
        "uid": read.metadata.uid,
        "image": read.spec.containers[0].image,
    }

    # Watch from the start (no resourceVersion) so the pod arrives as ADDED;
    # the first event ends the watch. timeout_seconds bounds a watch that
    # never delivers one, which then fails below.
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_pod,
        namespace,
        field_selector="metadata.name=" + pod_name,
        timeout_seconds=20,
    ):
        obj = event["object"]
        result["watched"] = {"type": event["type"], "name": obj.metadata.name, "uid": obj.metadata.uid}
        w.stop()
        break
    if "watched" not in result:
        raise RuntimeError("the watch ended without an event")

    deleted = core.delete_namespaced_pod(pod_name, namespace)
    result["deleted"] = {"kind": deleted.kind, "name": deleted.metadata.name}

    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
