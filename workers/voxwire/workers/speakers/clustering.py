"""How many voices a file holds, and which embedding is whose.

Agglomerative clustering (scikit-learn) of the embeddings of the voices heard in
each window (:mod:`.segmented`), cosine distance, average linkage: clusters
merge while their mean distance stays under :data:`DISTANCE_THRESHOLD`. The
threshold was chosen on the eval recordings with RTTM files and their
one-speaker recordings (``benchmarks/bench_diarization.py --thresholds`` prints
DER for neighbouring values): too few recordings to tune finer. Bounds given by
the session (``min_speakers``/``max_speakers``) override the count found: the
embeddings are then cut into the nearest allowed number of clusters.

A cluster of fewer than :data:`MIN_CLUSTER_WINDOWS` embeddings (a voice heard in
fewer than three windows: with a window every second, most voices are heard in
ten) is more often a cough, a laugh or an overlap than a voice: its embeddings
join the nearest larger cluster, unless the bounds need it. Finally each
embedding goes to the cluster whose centroid is nearest, which repairs those that
average linkage attached by a chain.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from sklearn.cluster import AgglomerativeClustering

from voxwire.workers.speakers.encoder import Embeddings, unit

DISTANCE_THRESHOLD = 0.6
"""Cosine distance (1 - similarity) under which clusters merge."""
MIN_CLUSTER_WINDOWS = 3

Labels = npt.NDArray[np.int64]


def _agglomerate(embeddings: Embeddings, clusters: int | None, threshold: float) -> Labels:
    model = AgglomerativeClustering(
        n_clusters=clusters,
        metric="cosine",
        linkage="average",
        distance_threshold=None if clusters is not None else threshold,
    )
    labels: Labels = model.fit_predict(embeddings).astype(np.int64)
    return labels


def _centroids(embeddings: Embeddings, labels: Labels) -> Embeddings:
    return unit(np.stack([embeddings[labels == k].mean(axis=0) for k in np.unique(labels)]))


def _renumber(labels: Labels) -> Labels:
    """Clusters numbered 0, 1, ... in order of their first embedding."""
    order = {int(k): n for n, k in enumerate(dict.fromkeys(labels.tolist()))}
    return np.array([order[int(k)] for k in labels], dtype=np.int64)


def cluster(
    embeddings: Embeddings,
    *,
    threshold: float = DISTANCE_THRESHOLD,
    min_speakers: int | None = None,
    max_speakers: int | None = None,
) -> Labels:
    """A speaker number per row of ``embeddings``: 0 for the first voice heard, then 1..."""
    count = len(embeddings)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    low = min(max(1, min_speakers or 1), count)
    high = min(max_speakers or count, count)
    if count == 1 or high == 1:
        return np.zeros(count, dtype=np.int64)
    labels = _agglomerate(embeddings, None, threshold)
    found = int(labels.max()) + 1
    if found > low:  # small clusters join their nearest neighbour
        sizes = np.bincount(labels)
        big = [k for k in range(found) if sizes[k] >= MIN_CLUSTER_WINDOWS]
        keep = big if len(big) >= low else sorted(range(found), key=lambda k: -sizes[k])[:low]
        if len(keep) < found:
            centres = _centroids(embeddings, labels)
            nearest = np.argmax(embeddings @ centres[keep].T, axis=1)
            labels = np.where(np.isin(labels, keep), labels, np.array(keep)[nearest])
            labels = np.unique(labels, return_inverse=True)[1].astype(np.int64)
            found = int(labels.max()) + 1
    if not low <= found <= high:
        labels = _agglomerate(embeddings, min(max(found, low), high), threshold)
    centres = _centroids(embeddings, labels)
    refined = np.argmax(embeddings @ centres.T, axis=1).astype(np.int64)
    if low <= len(np.unique(refined)) <= high:
        labels = refined
    return _renumber(labels)
