"""The Kopf operator: its handlers, the scheduling loops and their effects; it reaches Kubernetes through ``edge/``."""
