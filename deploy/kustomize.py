"""Render a kustomization offline: the subset of kustomize that ``deploy/k8s/`` uses, in Python.

``tests/integration/test_k8s.py`` renders ``deploy/k8s`` (and any overlay of it) with this
module, validates every object against the Kubernetes schemas and checks who mounts what,
without a cluster and without the kustomize binary (where ``kubectl`` is installed, the test
also checks that ``kubectl kustomize`` renders the same objects). Supported fields of a
``kustomization.yaml``; anything else is refused (:class:`ConfigError` naming it), so a
kustomization this renderer does not understand cannot pass the test unchecked:

``resources``
    YAML files (several documents each) and directories holding a kustomization (overlays),
    in order.
``namespace``
    Set on every namespaced object (not on cluster-scoped kinds such as Namespace).
``images``
    ``name`` with ``newName``, ``newTag`` and/or ``digest``: rewrites the ``image`` of every
    container and init container whose image is that name (with any tag or digest).
``replicas``
    ``name`` and ``count``: ``spec.replicas`` of the Deployments and StatefulSets of that name.
``patches``
    JSON 6902 patches (``add``, ``remove``, ``replace``; inline ``patch`` or a ``path``) applied
    to the objects matching ``target`` (``kind``, ``name``, optional ``group``/``version``/``namespace``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError

KUSTOMIZATION = "kustomization.yaml"
_FIELDS = {"apiVersion", "kind", "namespace", "resources", "images", "replicas", "patches"}
#: Kinds that live outside namespaces (the ones a namespace transformer leaves alone).
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}
_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def _yaml() -> Any:
    import yaml  # test-only dependency (the `test` extra), as for deploy/compose_env.py

    return yaml


def load_documents(path: Path) -> list[dict]:
    """The non-empty YAML documents of ``path``."""
    docs = [d for d in _yaml().safe_load_all(path.read_text()) if d is not None]
    if bad := [d for d in docs if not isinstance(d, dict) or "kind" not in d]:
        raise ConfigError(f"{path}: a document is not a Kubernetes object: {str(bad[0])[:80]}")
    return docs


def render(directory: str | Path) -> list[dict]:
    """The objects the kustomization in ``directory`` builds, in resource order."""
    directory = Path(directory)
    spec = _yaml().safe_load((directory / KUSTOMIZATION).read_text()) or {}
    if unknown := sorted(set(spec) - _FIELDS):
        raise ConfigError(f"{directory / KUSTOMIZATION}: fields {unknown} are not supported by deploy/kustomize.py")
    objects = _resources(directory, spec.get("resources", []))
    for patch in spec.get("patches", []):
        _patch(objects, patch, directory)
    for r in spec.get("replicas", []):
        for obj in objects:
            if obj["kind"] in _WORKLOADS and obj["metadata"]["name"] == r["name"]:
                obj["spec"]["replicas"] = int(r["count"])
    for image in spec.get("images", []):
        for obj in objects:
            for container in containers(obj):
                container["image"] = _new_image(container["image"], image)
    if "namespace" in spec:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = spec["namespace"]
    return objects


def _resources(directory: Path, entries: list[str]) -> list[dict]:
    objects: list[dict] = []
    for entry in entries:
        path = directory / entry
        if path.is_dir() and path.resolve() in [directory.resolve(), *directory.resolve().parents]:
            raise ConfigError(f"{directory / KUSTOMIZATION}: resource {entry} contains this kustomization (a cycle)")
        objects += render(path) if path.is_dir() else load_documents(path)
    return objects


def _patch(objects: list[dict], patch: dict, directory: Path) -> None:
    ops = patch.get("patch")
    ops = _yaml().safe_load(ops if ops is not None else (directory / patch["path"]).read_text())
    if not isinstance(ops, list):
        raise ConfigError(f"{directory / KUSTOMIZATION}: only JSON 6902 patches (a list of operations)")
    targets = [o for o in objects if _matches(o, patch.get("target") or {})]
    if not targets:
        raise ConfigError(f"{directory / KUSTOMIZATION}: no object matches patch target {patch.get('target')}")
    for obj in targets:
        for op in ops:
            apply_operation(obj, op)


def _matches(obj: dict, target: dict) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    have = {
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "group": group,
        "version": version,
        "namespace": obj["metadata"].get("namespace"),
    }
    return all(have[k] == v for k, v in target.items())


def pod_spec(obj: dict) -> dict | None:
    """The pod template's spec of a workload (or the spec of a Pod); None for other kinds."""
    if obj["kind"] == "Pod":
        return obj["spec"]
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if obj["kind"] in _WORKLOADS:
        return obj["spec"]["template"]["spec"]
    return None


def containers(obj: dict) -> list[dict]:
    """The init containers and containers of an object's pods (none for other kinds)."""
    spec = pod_spec(obj)
    return [] if spec is None else [*spec.get("initContainers", []), *spec.get("containers", [])]


def _new_image(current: str, rule: dict) -> str:
    name, _, digest = current.partition("@")
    repo, tag = name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "")
    if repo != rule["name"]:
        return current
    repo = rule.get("newName", repo)
    if "digest" in rule:
        return f"{repo}@{rule['digest']}"
    if "newTag" in rule:
        return f"{repo}:{rule['newTag']}"
    return repo + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ConfigError(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_operation(obj: dict, op: dict) -> None:
    """Apply one JSON 6902 ``add``, ``remove`` or ``replace`` operation to ``obj`` in place."""
    kind = op.get("op")
    if kind not in ("add", "remove", "replace"):
        raise ConfigError(f"JSON 6902 operation {kind!r} is not supported (add, remove, replace)")
    *parents, last = _pointer(op["path"])
    node: Any = obj
    try:
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if kind == "add":
                node.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del node[index]
            else:
                node[index] = copy.deepcopy(op["value"])
        elif kind == "add" or (kind == "replace" and last in node):
            node[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del node[last]
        else:
            raise KeyError(last)
    except (KeyError, IndexError, ValueError, TypeError):
        raise ConfigError(f"JSON 6902 {kind} {op['path']}: no such location in {obj['kind']}") from None
