"""The pure core: models, matching, verdicts and scoring. No I/O, no clock, no Kubernetes client."""
