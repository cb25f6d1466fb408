"""Render a kustomization the way `kubectl kustomize` does, for the parts our manifests
use: resources (files and directories), namespace, images and strategic-merge patches.

No PyPI package renders kustomizations (pykustomize needs Python 3.14, `kustomize` on
PyPI builds manifests in Python rather than reading them), and kubectl is not here, so
the tests carry this small loader. Anything else in a kustomization.yaml is refused,
so a manifest cannot silently use a feature the tests do not render.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

KNOWN = {"apiVersion", "kind", "resources", "namespace", "images", "patches"}
# Kinds that live in no namespace (kustomize leaves them as they are).
CLUSTER_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"}
# Lists whose items a strategic merge matches by a key, as Kubernetes' patch strategy.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "env": "name",
    "volumeClaimTemplates": "metadata.name",
}


def render(directory: Path) -> list[dict[str, Any]]:
    """The resources of the kustomization in `directory`, transformed."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KNOWN
    if unknown:
        raise ValueError(f"{directory}: kustomization fields this loader cannot render: {unknown}")
    docs: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            docs += render(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in kustomization.get("patches", []):
        if set(patch) != {"path"}:
            raise ValueError(f"{directory}: only patches with a path are rendered: {patch}")
        body = yaml.safe_load((directory / patch["path"]).read_text())
        target = _find(docs, body["kind"], body["metadata"]["name"])
        merged = merge(target, body)
        target.clear()
        target.update(merged)
    if namespace := kustomization.get("namespace"):
        for doc in docs:
            if doc["kind"] not in CLUSTER_KINDS:
                doc["metadata"]["namespace"] = namespace
    for image in kustomization.get("images", []):
        for doc in docs:
            for container in _containers(doc):
                name, _, _tag = container["image"].partition(":")
                if name == image["name"]:
                    new = image.get("newName", name)
                    container["image"] = f"{new}:{image['newTag']}" if "newTag" in image else new
    return docs


def _find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise ValueError(f"patch target {kind}/{name} is not among the resources")


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("containers", []), *spec.get("initContainers", [])]


def _key(item: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        item = item.get(part, {}) if isinstance(item, dict) else {}
    return item


def merge(base: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge of `patch` into `base`: maps merge, lists of named items merge
    item by item, anything else is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value, key) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        out = copy.deepcopy(base)
        for item in patch:
            match = next((i for i, b in enumerate(out) if _key(b, key) == _key(item, key)), None)
            if match is None:
                out.append(copy.deepcopy(item))
            else:
                out[match] = merge(out[match], item)
        return out
    return copy.deepcopy(patch)
