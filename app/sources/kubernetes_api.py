"""Reads Jobs, training objects (custom resources), Pods and Kueue Workloads through
the ``kubernetes`` client (an optional dependency: ``pip install 'cadence[kubernetes]'``),
as the API's JSON, page by page."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

PAGE = 500
# A list that never ends (``continue`` given forever) stops here: 400 pages of 500 are
# 200,000 objects, far more than one namespace's Jobs or Pods.
MAX_PAGES = 400
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # v1beta1 is deprecated upstream


class KubeError(Exception):
    """The kubeconfig is unusable, or the API refused or could not be reached."""


class Forbidden(KubeError):
    """The credentials work, but may not list this resource (403)."""


class KubeSource:
    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
        try:
            from kubernetes import client, config
        except ImportError as exc:
            raise KubeError(
                "the kubernetes package is not installed: pip install 'cadence[kubernetes]'"
            ) from exc
        try:
            api = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError, TypeError) as exc:
            raise KubeError(f"kubeconfig: {exc}") from exc
        chosen = next((c for c in contexts if c["name"] == context), active) if context else active
        self.namespace = namespace or (chosen or {}).get("context", {}).get("namespace")
        self.host = api.configuration.host
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._exception = client.exceptions.ApiException

    def jobs(self, selector: str | None) -> list[dict[str, Any]]:
        if self.namespace:
            ns = self.namespace
            return self._all(lambda **kw: self._batch.list_namespaced_job(ns, **kw), selector)
        return self._all(self._batch.list_job_for_all_namespaces, selector)

    def pods(self, selector: str) -> list[dict[str, Any]]:
        """The pods carrying a label (``batch.kubernetes.io/job-name``): one list per kind."""
        if self.namespace:
            ns = self.namespace
            return self._all(lambda **kw: self._core.list_namespaced_pod(ns, **kw), selector)
        return self._all(self._core.list_pod_for_all_namespaces, selector)

    def workloads(self) -> list[dict[str, Any]]:
        """Kueue's Workloads, v1beta2 else v1beta1; none where Kueue is not installed."""
        for version in KUEUE_VERSIONS:
            found = self.custom((KUEUE_GROUP, version, "workloads"), None)
            if found is not None:
                return found
        return []

    def custom(
        self, api: tuple[str, str, str], selector: str | None
    ) -> list[dict[str, Any]] | None:
        """Objects of a custom resource; None when the API does not serve it (404)."""
        group, version, plural = api
        ns = self.namespace

        def call(**kw: Any) -> Any:
            if ns:
                return self._custom.list_namespaced_custom_object(group, version, ns, plural, **kw)
            return self._custom.list_cluster_custom_object(group, version, plural, **kw)

        try:
            return self._all(call, selector, missing_ok=True)
        except _NotFound:
            return None

    def _all(
        self, call: Callable[..., Any], selector: str | None, missing_ok: bool = False
    ) -> list[dict[str, Any]]:
        return [item for page in self._pages(call, selector, missing_ok) for item in page]

    def _pages(
        self, call: Callable[..., Any], selector: str | None, missing_ok: bool
    ) -> Iterator[list[dict[str, Any]]]:
        token: str | None = None
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"limit": PAGE, "_preload_content": False}
            if selector:
                kwargs["label_selector"] = selector
            if token:
                kwargs["_continue"] = token
            body = self._get(call, kwargs, missing_ok)
            items, meta = body.get("items") or [], body.get("metadata") or {}
            if not isinstance(items, list) or not isinstance(meta, dict):
                raise KubeError(
                    f"the Kubernetes API at {self.host} answered a list of the wrong shape"
                )
            yield items
            token = meta.get("continue")
            if not token:
                return
            if token in seen:
                raise KubeError(
                    f"the Kubernetes API at {self.host} gave the same continue token twice: "
                    "the list would never end; nothing was imported"
                )
            seen.add(token)
        raise KubeError(
            f"the Kubernetes API at {self.host} was still paging after {MAX_PAGES} pages of "
            f"{PAGE}: stopped, nothing was imported (narrow it with --namespace or --selector)"
        )

    def _get(self, call: Callable[..., Any], kwargs: dict[str, Any], missing_ok: bool) -> Any:
        import urllib3

        try:
            answer = call(**kwargs)
        except self._exception as exc:
            if exc.status == 404 and missing_ok:
                raise _NotFound from exc
            if exc.status in (401, 403):
                kind = Forbidden if exc.status == 403 else KubeError
                raise kind(
                    f"the Kubernetes API at {self.host} refused the credentials "
                    f"({exc.status} {exc.reason})"
                ) from exc
            raise KubeError(f"the Kubernetes API answered {exc.status} {exc.reason}") from exc
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"the Kubernetes API at {self.host} is unreachable: {exc}") from exc
        try:
            body = json.loads(answer.data)
        except (ValueError, RecursionError) as exc:
            raise KubeError(f"the Kubernetes API at {self.host} answered no JSON") from exc
        if not isinstance(body, dict):
            raise KubeError(f"the Kubernetes API at {self.host} answered no JSON object")
        return body


class _NotFound(Exception):
    pass
