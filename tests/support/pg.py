"""The throwaway PostgreSQL cluster of the test fixtures: :class:`memgas.store.pgtemp.TempCluster`
(``initdb`` in a temporary folder, ``pg_ctl start`` on a free loopback port with trust authentication, as the
``postgres`` system user when the tests run as root), and the one-line reason when none can start here.
"""

from __future__ import annotations

from memgas.store.pgtemp import TempCluster as Cluster
from memgas.store.pgtemp import unavailable

__all__ = ["Cluster", "unavailable"]
