"""Prometheus metrics and the health/metrics HTTP server; no kopf, no Kubernetes client."""
