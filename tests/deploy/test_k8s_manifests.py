"""k8s/ renders, every object is valid Kubernetes, and manifests agree with the code and compose.

Offline: overlays are rendered with tests/deploy/kustomization.py (checked against
``kubectl kustomize`` when kubectl is installed), validated with kubernetes-validate --strict
against the schemas of two Kubernetes versions, then cross-checked: Service selectors and
NetworkPolicies select real pods, env names are fields of the services' settings classes and the
same names docker-compose.yml uses, probe and scrape paths are routes of the real apps.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # the package ships no type hints
import pytest
import yaml
from fastapi import FastAPI

from headwater_cli import build_parser
from headwater_kernel.settings import ServiceSettings
from tests.deploy import compose
from tests.deploy.kustomization import Object, pod_template, render
from tests.support import ROOT

K8S = ROOT / "k8s"
OVERLAYS = ("dev", "prod")
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
# Secrets production creates out of band (docs/deployment.md), with the keys pods read from them.
EXTERNAL_SECRETS = {
    "postgres-credentials": {"POSTGRES_PASSWORD"},
    "registry-database": {"REGISTRY_DATABASE_URL"},
    "broker-metadata": {"BROKER_METADATA_URL"},
    "coordinator-redis": {"COORDINATOR_REDIS_URL"},
}
# Env vars that are not settings: the broker's ADVERTISED_URL is built from them with $(VAR).
HELPER_ENV = {"POD_NAME", "POD_NAMESPACE"}
APP_SERVICES = ("broker", "registry", "coordinator")
# The Spark job's settings are the env defaults of its flags (docs/settings.md).
VALIDATE_ENV = {"HEADWATER_BROKERS", "HEADWATER_REGISTRY_URL"}
# The CronJob's cluster-mode spark-submit also reads the image its driver and executors run.
SUBMIT_ENV = {"HEADWATER_SPARK_IMAGE"}


def rendered(overlay: str) -> list[Object]:
    return render(K8S / "overlays" / overlay)


def by_kind(objects: list[Object], kind: str) -> list[Object]:
    return [obj for obj in objects if obj["kind"] == kind]


def workloads(objects: list[Object]) -> Iterator[tuple[Object, Object]]:
    for obj in objects:
        template = pod_template(obj)
        if template is not None:
            yield obj, template


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def component(container: Object) -> str | None:
    """Which Headwater service a container runs, from its command (None for Redis/PostgreSQL)."""
    command = container.get("command", [])
    if command[:2] == ["python", "-m"] and command[2].startswith("headwater_"):
        return str(command[2].removeprefix("headwater_"))
    if command[:2] == ["headwater", "validate"] or command[:1] == ["spark-submit"]:
        return "validate"
    return None


def job_arguments(command: list[str]) -> list[str]:
    """``headwater validate`` arguments of a local command or of a cluster-mode spark-submit
    (those after its ``local://`` primary resource)."""
    if command[:1] == ["spark-submit"]:
        [resource] = [a for a in command if a.startswith("local://")]
        assert resource.endswith("/site-packages/headwater_spark/validate.py")
        return ["validate", *command[command.index(resource) + 1 :]]
    return command[1:]


def env_names(container: Object, objects: list[Object]) -> set[str]:
    """Every env name the container sees: explicit env plus keys of its ConfigMaps and Secrets."""
    names = {entry["name"] for entry in container.get("env", [])}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            names |= set(config_map(objects, source["configMapRef"]["name"])["data"])
        else:
            names |= secret_keys(objects, source["secretRef"]["name"])
    return names


def config_map(objects: list[Object], name: str) -> Object:
    [found] = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == name]
    return found


def secret_keys(objects: list[Object], name: str) -> set[str]:
    found = [o for o in by_kind(objects, "Secret") if o["metadata"]["name"] == name]
    if found:
        return set(found[0].get("stringData", {})) | set(found[0].get("data", {}))
    return EXTERNAL_SECRETS[name]


def settings_class(service: str) -> type[ServiceSettings]:
    module = importlib.import_module(f"headwater_{service}.settings")
    [cls] = [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, ServiceSettings) and c is not ServiceSettings
    ]
    return cls


def setting_names(service: str) -> set[str]:
    cls = settings_class(service)
    prefix = str(cls.model_config.get("env_prefix", ""))
    return {f"{prefix}{field}".upper() for field in cls.model_fields}


def compose_services() -> dict[str, Any]:
    # Interpolated with defaults only (the password is required but irrelevant here).
    document = compose.load(ROOT / "docker-compose.yml", {"POSTGRES_PASSWORD": "unused"})
    services: dict[str, Any] = document["services"]
    return services


# --- rendering and schema validation ---------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_is_valid_kubernetes(overlay: str) -> None:
    objects = rendered(overlay)
    kinds = sorted({obj["kind"] for obj in objects})
    assert kinds == sorted(
        {
            "ConfigMap",
            "CronJob",
            "Deployment",
            "NetworkPolicy",
            "PersistentVolumeClaim",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "StatefulSet",
            *(["Secret"] if overlay == "dev" else []),
        }
    )
    for obj in objects:
        assert obj["metadata"]["namespace"] == f"headwater-{overlay}"
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == overlay
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


def test_strict_validation_rejects_an_unknown_field() -> None:
    [service] = [o for o in rendered("dev") if o["metadata"]["name"] == "registry"][:1]
    broken = {**service, "spec": {**service["spec"], "selectr": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_base_alone_is_complete_for_managed_datastores() -> None:
    # What remains when an overlay drops ../../datastores: no reference to in-cluster Redis or
    # PostgreSQL may be left behind except through the Secrets a user fills in.
    objects = render(K8S / "base")
    names = {obj["metadata"]["name"] for obj in objects}
    assert not names & {"redis", "postgres", "redis-ingress", "postgres-ingress"}
    text = yaml.safe_dump_all(objects)
    assert "redis:" not in text
    assert "postgres:" not in text


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed here")
@pytest.mark.parametrize("directory", ["base", "datastores", "overlays/dev", "overlays/prod"])
def test_renderer_matches_kubectl_kustomize(directory: str) -> None:
    output = subprocess.run(
        ["kubectl", "kustomize", str(K8S / directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(output) if o}
    mine = {(o["kind"], o["metadata"]["name"]): o for o in render(K8S / directory)}
    assert mine == theirs


# --- the shape the issue asks for ------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_brokers_are_a_statefulset_with_headless_service_pvcs_and_pdb(overlay: str) -> None:
    objects = rendered(overlay)
    [broker] = [o for o in by_kind(objects, "StatefulSet") if o["metadata"]["name"] == "broker"]
    spec = broker["spec"]
    assert spec["replicas"] == 3
    [headless] = [
        o for o in by_kind(objects, "Service") if o["metadata"]["name"] == spec["serviceName"]
    ]
    assert headless["spec"]["clusterIP"] == "None"
    assert selects(headless["spec"]["selector"], spec["template"]["metadata"]["labels"])
    [claim] = spec["volumeClaimTemplates"]
    [container] = spec["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    data_dir = config_map(objects, "broker-config")["data"]["BROKER_DATA_DIR"]
    assert mounts[claim["metadata"]["name"]] == data_dir
    storage = claim["spec"]["resources"]["requests"]["storage"]
    assert storage == {"dev": "1Gi", "prod": "200Gi"}[overlay]
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in anti
    assert ("requiredDuringSchedulingIgnoredDuringExecution" in anti) == (overlay == "prod")
    [pdb] = [
        o for o in by_kind(objects, "PodDisruptionBudget") if o["metadata"]["name"] == "broker"
    ]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert selects(pdb["spec"]["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
    # BROKER_ID comes from the StatefulSet ordinal.
    broker_id = next(e for e in container["env"] if e["name"] == "BROKER_ID")
    assert broker_id["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    # The rack is the node's zone, read from the pod's topology label.
    rack = next(e for e in container["env"] if e["name"] == "BROKER_RACK")
    assert rack["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['topology.kubernetes.io/zone']"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_replicated_topics_default_to_two_in_sync_replicas_as_in_compose(overlay: str) -> None:
    # Topics get replication_factor 3 (three brokers); min.insync.replicas 2 makes an acks=all
    # write survive any one broker's crash (docs/cluster.md, "What acknowledged means").
    objects = rendered(overlay)
    assert config_map(objects, "broker-config")["data"]["BROKER_MIN_INSYNC_REPLICAS"] == "2"
    brokers = {n: s for n, s in compose_services().items() if n.startswith("broker-")}
    assert len(brokers) == 3
    for service in brokers.values():
        assert service["environment"]["BROKER_MIN_INSYNC_REPLICAS"] == "2"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_registry_and_coordinator_are_two_replica_deployments_with_services(
    overlay: str,
) -> None:
    objects = rendered(overlay)
    deployments = {o["metadata"]["name"]: o for o in by_kind(objects, "Deployment")}
    assert set(deployments) == {"registry", "coordinator"}
    for name, deployment in deployments.items():
        assert deployment["spec"]["replicas"] == 2
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        [service] = [o for o in by_kind(objects, "Service") if o["metadata"]["name"] == name]
        assert selects(service["spec"]["selector"], labels)
    stateful = {o["metadata"]["name"] for o in by_kind(objects, "StatefulSet")}
    assert stateful == {"broker", "redis", "postgres"}
    [cron] = by_kind(objects, "CronJob")
    assert cron["spec"].get("suspend", False) == (overlay == "dev")


# --- cross-references ------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_selectors_and_target_ports_match_pods(overlay: str) -> None:
    objects = rendered(overlay)
    pods = [template for _, template in workloads(objects)]
    for service in by_kind(objects, "Service"):
        selected = [
            t for t in pods if selects(service["spec"]["selector"], t["metadata"]["labels"])
        ]
        assert len(selected) == 1, service["metadata"]["name"]
        ports = {
            p["name"]: p["containerPort"]
            for c in selected[0]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for port in service["spec"]["ports"]:
            assert ports[port["targetPort"]] == port["port"], service["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_select_real_pods_and_ports(overlay: str) -> None:
    objects = rendered(overlay)
    pods = [template for _, template in workloads(objects)]
    for policy in by_kind(objects, "NetworkPolicy"):
        if policy["metadata"]["name"] == "spark-ingress":
            # Selects the driver and executor pods Spark creates at run time (label spark-role),
            # which no manifest holds.
            assert policy["spec"]["podSelector"]["matchExpressions"] == [
                {"key": "spark-role", "operator": "Exists"}
            ]
            continue
        target = policy["spec"]["podSelector"].get("matchLabels", {})
        selected = [t for t in pods if selects(target, t["metadata"]["labels"])]
        assert selected, policy["metadata"]["name"]
        open_ports = {
            p["containerPort"]
            for t in selected
            for c in t["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for rule in policy["spec"].get("ingress", []):
            assert {p["port"] for p in rule["ports"]} <= open_ports
            for peer in rule["from"]:
                if "podSelector" in peer:
                    source = peer["podSelector"]["matchLabels"]
                    assert any(selects(source, t["metadata"]["labels"]) for t in pods)
    # Each datastore admits exactly its clients: Redis the coordinator, PostgreSQL the registry
    # and the brokers (the cluster metadata).
    rules = {
        p["metadata"]["name"]: p["spec"]["ingress"][0]["from"]
        for p in by_kind(objects, "NetworkPolicy")
        if "ingress" in p["spec"]
    }
    # The catch-all policy has no rules: it denies every ingress not allowed by another policy.
    [deny] = [p for p in by_kind(objects, "NetworkPolicy") if p["spec"]["podSelector"] == {}]
    assert "ingress" not in deny["spec"]
    assert rules["redis-ingress"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "coordinator"}}}
    ]
    assert rules["postgres-ingress"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "registry"}}},
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "broker"}}},
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_referenced_config_maps_and_secrets_exist(overlay: str) -> None:
    objects = rendered(overlay)
    config_maps = {o["metadata"]["name"] for o in by_kind(objects, "ConfigMap")}
    secrets = {o["metadata"]["name"]: o for o in by_kind(objects, "Secret")}
    for _, template in workloads(objects):
        for container in template["spec"]["containers"]:
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps
                else:
                    assert source["secretRef"]["name"] in (
                        secrets if overlay == "dev" else EXTERNAL_SECRETS
                    )
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secret_keys(objects, ref["name"])
    if overlay == "dev":
        # The documented out-of-band Secrets are exactly the ones dev ships.
        assert {name: secret_keys(objects, name) for name in secrets} == EXTERNAL_SECRETS
    else:
        assert secrets == {}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_env_names_are_settings_fields_and_match_compose(overlay: str) -> None:
    objects = rendered(overlay)
    compose = compose_services()
    seen = set()
    for _, template in workloads(objects):
        for container in template["spec"]["containers"]:
            name = component(container)
            if name is None:
                continue
            seen.add(name)
            names = env_names(container, objects) - HELPER_ENV
            if name == "validate":
                names -= SUBMIT_ENV
            allowed = VALIDATE_ENV if name == "validate" else setting_names(name)
            assert names <= allowed, (name, names - allowed)
            compose_name = "broker-0" if name == "broker" else name
            assert names == set(compose[compose_name]["environment"]), name
            # The CronJob submits in cluster mode; compose runs the same job locally.
            assert job_arguments(container["command"]) == job_arguments(
                compose[compose_name]["command"]
            )
    assert seen == {*APP_SERVICES, "validate"}


def test_validate_command_parses_with_the_real_cli_and_writes_to_its_volume() -> None:
    objects = rendered("prod")
    [cron] = by_kind(objects, "CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = build_parser().parse_args(job_arguments(container["command"]))
    assert args.topic == "orders"
    assert args.dead_letter_topic == "orders-dead-letter"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    output = volumes[mounts["/var/lib/headwater/output"]]
    [claim] = by_kind(objects, "PersistentVolumeClaim")
    assert output["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    for path in (args.output, args.summary, args.state_dir, container["workingDir"]):
        assert path.startswith("/var/lib/headwater/output")
    # The driver and executor pods mount the same claim at the same path (cluster mode).
    confs = dict(
        c.split("=", 1)
        for c, flag in zip(container["command"][1:], container["command"], strict=False)
        if flag == "--conf"
    )
    for role in ("driver", "executor"):
        volume = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.output"
        assert confs[f"{volume}.options.claimName"] == claim["metadata"]["name"]
        assert confs[f"{volume}.mount.path"] == "/var/lib/headwater/output"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert confs["spark.kubernetes.container.image"] == "$(HEADWATER_SPARK_IMAGE)"
    image = config_map(objects, "validate-config")["data"]["HEADWATER_SPARK_IMAGE"]
    assert image == container["image"]  # driver and executors run the submitter's image


def test_validate_env_names_are_read_by_the_spark_job() -> None:
    source = (ROOT / "spark" / "headwater_spark" / "validate.py").read_text()
    for name in VALIDATE_ENV:
        assert name in source


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_are_hardened_and_bounded(overlay: str) -> None:
    for obj, template in workloads(rendered(overlay)):
        pod = template["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
        assert pod["securityContext"]["runAsUser"] > 0
        # Only the validation CronJob talks to the API server (spark-submit creates pods).
        assert pod["automountServiceAccountToken"] is (obj["kind"] == "CronJob")
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"]["drop"] == ["ALL"]
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) == {"cpu", "memory"}
            assert re.fullmatch(r"[a-z0-9./-]+(:[\w.-]+)", container["image"]), container["image"]
            assert not container["image"].endswith(":latest")


def test_app_containers_probe_and_scrape_their_own_port() -> None:
    objects = rendered("prod")
    for _obj, template in workloads(objects):
        [container] = template["spec"]["containers"]
        name = component(container)
        if name not in APP_SERVICES:
            continue
        [port] = container["ports"]
        assert port["name"] == "http"
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port["containerPort"])
        assert annotations["prometheus.io/path"] == "/metrics"
        configured = config_map(objects, f"{name}-config")["data"][f"{name.upper()}_PORT"]
        assert int(configured) == port["containerPort"]


def app_paths(service: str, tmp_path: Path, redis_url: str, redis_prefix: str) -> set[str]:
    """The route paths of the real app, built with create_app on throwaway storage."""
    module = importlib.import_module(f"headwater_{service}.app")
    cls = settings_class(service)
    values = {
        "data_dir": str(tmp_path / service),
        "database_url": f"sqlite:///{tmp_path / 'registry.db'}",
        "redis_url": redis_url,
        "key_prefix": redis_prefix,
    }
    # model_validate, not cls(...): the test's own environment must not leak into the settings.
    settings = cls.model_validate({k: v for k, v in values.items() if k in cls.model_fields})
    app: FastAPI = module.create_app(settings)
    return {getattr(route, "path", "") for route in app.routes}


@pytest.mark.parametrize("service", APP_SERVICES)
def test_probe_and_scrape_paths_are_routes_of_the_app(
    service: str, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    objects = rendered("prod")
    [template] = [
        t
        for _, t in workloads(objects)
        if any(component(c) == service for c in t["spec"]["containers"])
    ]
    [container] = template["spec"]["containers"]
    wanted = {
        container["livenessProbe"]["httpGet"]["path"],
        container["readinessProbe"]["httpGet"]["path"],
        template["metadata"]["annotations"]["prometheus.io/path"],
    }
    assert wanted == {"/healthz", "/readyz", "/metrics"}
    assert wanted <= app_paths(service, tmp_path, redis_url, redis_prefix)


def test_every_app_container_runs_a_module_that_exists() -> None:
    for _, template in workloads(rendered("prod")):
        for container in template["spec"]["containers"]:
            if component(container) in APP_SERVICES:
                module = container["command"][2]
                assert importlib.util.find_spec(f"{module}.__main__") is not None, module


URL = re.compile(r"[a-z+]+://(?:[^@/\s]*@)?([A-Za-z0-9.$()_-]+):(\d+)")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_urls_in_configuration_point_at_services_that_exist(overlay: str) -> None:
    objects = rendered(overlay)
    services = {o["metadata"]["name"]: o for o in by_kind(objects, "Service")}
    stateful = {o["spec"]["serviceName"]: o for o in by_kind(objects, "StatefulSet")}
    values = [v for o in by_kind(objects, "ConfigMap") for v in o["data"].values()]
    values += [v for o in by_kind(objects, "Secret") for v in o.get("stringData", {}).values()]
    values += [
        e["value"]
        for _, t in workloads(objects)
        for c in t["spec"]["containers"]
        for e in c.get("env", [])
        if "value" in e
    ]
    checked = 0
    for value in values:
        for host, port in URL.findall(value):
            name = host.split(".")[1] if "." in host else host
            service = services[name]
            assert int(port) in {p["port"] for p in service["spec"]["ports"]}, value
            if "." in host:
                # <pod>.<headless service>: the pod must be one of the StatefulSet's replicas.
                pod = host.split(".")[0]
                owner = stateful[name]
                if pod != "$(POD_NAME)":
                    ordinal = int(pod.removeprefix(owner["metadata"]["name"] + "-"))
                    assert ordinal < owner["spec"]["replicas"], value
            checked += 1
    # Coordinator and validation job each list the 3 brokers; registry URL; advertised URL;
    # dev adds the Redis and PostgreSQL URLs (registry, broker metadata) in its Secrets.
    assert checked == {"dev": 11, "prod": 8}[overlay]
