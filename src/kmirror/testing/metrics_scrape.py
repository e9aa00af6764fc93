"""A node's Prometheus endpoint (`metrics.port`) read by tests: every sample, or one family."""

from __future__ import annotations

import urllib.request

TEXT_FORMAT = "text/plain; version=0.0.4"


def scrape(port: int) -> dict[str, float]:
    """{sample name with its labels: value} of one scrape, in the Prometheus text format."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith(TEXT_FORMAT), response.headers["Content-Type"]
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def family_of(sample: str) -> str:
    return sample.split("{", 1)[0]


def matching(samples: dict[str, float], family: str, *labels: str) -> dict[str, float]:
    """The samples of `family` whose labels contain every one of `labels` (`name="value"`)."""
    return {k: v for k, v in samples.items() if family_of(k) == family and all(label in k for label in labels)}


def metric_value(port: int, family: str) -> float | None:
    """The value of the single sample of a family, None when the family is absent."""
    values = list(matching(scrape(port), family).values())
    assert len(values) <= 1, f"{family} has {len(values)} samples"
    return values[0] if values else None



MIRROR_FETCH_REQUESTS = "kafka_server_fetcherstats_requests_total"


def mirror_fetch_requests(port: int, mirror: str) -> dict[str, float]:
    """Fetch requests sent so far by each mirror fetcher of `mirror` on the node, by sample."""
    return matching(scrape(port), MIRROR_FETCH_REQUESTS, f'mirror_name="{mirror}"')


def request_count(port: int, request: str) -> float:
    """Requests of one API (Kafka's request name: `Metadata`, `FetchConsumer`, ...) the node
    has served so far, all versions."""
    return sum(matching(scrape(port), "kafka_network_requestmetrics_requests_total", f'request="{request}"').values())
