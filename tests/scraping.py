"""A broker's Prometheus metrics, as a test reads them: the port it logged, its samples by name."""

import re
import urllib.request

from weir.console.server import parse_metrics


def broker_metrics(broker) -> dict[str, list]:
    """name → [(labels, value)] from a broker started with metrics.port (0: it logs the port taken)."""
    port = re.search(r"metrics on http://[^:]+:(\d+)/metrics", broker.output()).group(1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return parse_metrics(response.read().decode())


def metric(broker, name: str) -> float:
    """The sum of a metric's samples."""
    return sum(value for _, value in broker_metrics(broker)[name])
