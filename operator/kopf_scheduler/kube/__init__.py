"""The Kopf operator: the only package that imports kopf or a Kubernetes client."""
