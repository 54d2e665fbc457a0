"""The reference agent: a deterministic agent that speaks the agent contract over HTTP.

``script`` (pure) decides, from a behaviour script and the prompt, which Kubernetes operations a
persona performs and what it answers; ``executing`` performs them with lightkube as the principal
whose kubeconfig the request hands over; ``server`` serves the contract.
"""
