"""`weir bench`: throughput, latency and CPU measured against other targets in the same run."""
