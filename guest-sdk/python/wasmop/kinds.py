"""The built-in kinds plugins use most, so that a kind is named once and never misspelt.
Declare others (and custom resources) with `Kind(group, version, kind, namespaced)`."""

from .objects import Kind

CONFIG_MAP = Kind("", "v1", "ConfigMap")
SECRET = Kind("", "v1", "Secret")
SERVICE = Kind("", "v1", "Service")
POD = Kind("", "v1", "Pod")
NAMESPACE = Kind("", "v1", "Namespace", namespaced=False)
RESOURCE_QUOTA = Kind("", "v1", "ResourceQuota")
LIMIT_RANGE = Kind("", "v1", "LimitRange")
DEPLOYMENT = Kind("apps", "v1", "Deployment")
JOB = Kind("batch", "v1", "Job")
NETWORK_POLICY = Kind("networking.k8s.io", "v1", "NetworkPolicy")
