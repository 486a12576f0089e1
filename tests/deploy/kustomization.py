"""A small, strict renderer for the subset of Kustomize that k8s/ uses, so tests need no kubectl.

Supported kustomization fields: ``resources`` (files and directories), ``namespace``, ``labels``
(``pairs`` with ``includeSelectors: false``: metadata labels only), ``images`` (``newName`` /
``newTag``) and ``patches`` given by ``path`` (strategic merge of our own patches, matched by
kind and name). Anything else raises :class:`UnsupportedKustomizationError` rather than rendering
something kustomize would not. Strategic merge follows the Kubernetes patch strategies for the
lists our patches touch (containers and volumes by name, mounts by path, ports by number) and
replaces lists that have no merge key; a list it does not know raises too. When ``kubectl`` is
installed, tests/deploy/test_k8s_manifests.py checks this renderer against ``kubectl kustomize``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

Object = dict[str, Any]

FIELDS = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "patches"}

# Kubernetes' patchMergeKey for the lists our patches may touch.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
# Lists Kubernetes replaces wholesale in a strategic merge (no patch strategy).
REPLACED_LISTS = {
    "command",
    "args",
    "accessModes",
    "volumeClaimTemplates",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
    "drop",
    "envFrom",
}
POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


class UnsupportedKustomizationError(Exception):
    """The kustomization uses a feature this renderer does not implement."""


def render(directory: Path) -> list[Object]:
    """The objects ``kustomize build directory`` would emit (in file order, not kind order)."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(spec) - FIELDS
    if unknown:
        raise UnsupportedKustomizationError(f"{directory}: unsupported fields {sorted(unknown)}")
    objects: list[Object] = []
    for resource in spec.get("resources", []):
        path = directory / resource
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(load(path))
    for patch in spec.get("patches", []):
        if set(patch) != {"path"}:
            raise UnsupportedKustomizationError(f"{directory}: only patches by path are supported")
        for doc in load(directory / patch["path"]):
            target = find(objects, doc["kind"], doc["metadata"]["name"])
            merged = strategic_merge(target, doc, "")
            objects[objects.index(target)] = merged
    if "namespace" in spec:
        for obj in objects:
            obj["metadata"]["namespace"] = spec["namespace"]
            # As kustomize does: a binding's ServiceAccount subjects move with the namespace.
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = spec["namespace"]
    for label in spec.get("labels", []):
        if label.get("includeSelectors", False) or label.get("includeTemplates", False):
            raise UnsupportedKustomizationError("labels must not include selectors or templates")
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update(label["pairs"])
    for image in spec.get("images", []):
        for obj in objects:
            for container in containers(obj):
                if image_name(container["image"]) == image["name"]:
                    name = image.get("newName", image["name"])
                    container["image"] = f"{name}:{image['newTag']}" if "newTag" in image else name
    return objects


def load(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def find(objects: list[Object], kind: str, name: str) -> Object:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise UnsupportedKustomizationError(f"patch target {kind}/{name} not found")


def strategic_merge(base: Any, patch: Any, field: str) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = strategic_merge(base[key], value, key) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(patch, list):
        if field in REPLACED_LISTS:
            return patch
        if field not in MERGE_KEYS:
            raise UnsupportedKustomizationError(f"no merge strategy known for list {field!r}")
        key = MERGE_KEYS[field]
        merged_list = list(base)
        for item in patch:
            for i, existing in enumerate(merged_list):
                if existing.get(key) == item.get(key):
                    merged_list[i] = strategic_merge(existing, item, field)
                    break
            else:
                merged_list.append(item)
        return merged_list
    return patch


def pod_template(obj: Object) -> Object | None:
    """The pod template of a workload object, or None for other kinds."""
    path = POD_TEMPLATE_PATHS.get(obj["kind"])
    if path is None:
        return None
    node: Object = obj
    for step in path:
        node = node[step]
    return node


def containers(obj: Object) -> list[Object]:
    template = pod_template(obj)
    if template is None:
        return []
    spec = template["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def image_name(image: str) -> str:
    """``registry/name:tag`` or ``name@sha256:...`` without its tag or digest."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]
