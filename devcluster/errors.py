"""Errors of the local OpenSearch helper.

ClusterError            anything that stops provisioning or running the local cluster
├── ProvisionError      Maven or javac failed, or java/mvn are missing
├── PortInUseError      a port the cluster needs is taken by another process
└── StartupError        a node did not become ready in time (names its log)
"""

from __future__ import annotations

from pathlib import Path


class ClusterError(Exception):
    """Base of every error the local-cluster helper raises on purpose."""


class ProvisionError(ClusterError):
    """The OpenSearch artifacts could not be resolved or the launcher not compiled."""


class PortInUseError(ClusterError):
    """A port the cluster needs is already bound by something else."""


class StartupError(ClusterError):
    """A node died or the cluster did not reach the wanted health before the deadline."""

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path
