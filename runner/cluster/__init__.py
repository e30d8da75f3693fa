"""The simulated inference cluster shared by the mock server and the virtual-time simulator.

Pure and clock-free: `Cluster.submit(request, now_s)` routes one request the way a Dynamo
frontend would (session affinity, router mode) and returns its analytic timing on the chosen
engine. No I/O, no asyncio, no wall clock; callers bring the time and do the waiting.
"""

from runner.cluster.affinity import SessionAction
from runner.cluster.cluster import (
    AffinityOutcome,
    Cluster,
    ClusterRequest,
    ClusterStats,
    ClusterTotals,
    Placement,
    Rejection,
    WorkerStats,
)
from runner.cluster.config import ClusterConfig, DynamoVersion, RouterMode
from runner.cluster.keys import BlockPart, chain_block_keys

__all__ = [
    "AffinityOutcome",
    "BlockPart",
    "Cluster",
    "ClusterConfig",
    "ClusterRequest",
    "ClusterStats",
    "ClusterTotals",
    "DynamoVersion",
    "Placement",
    "Rejection",
    "RouterMode",
    "SessionAction",
    "WorkerStats",
    "chain_block_keys",
]
