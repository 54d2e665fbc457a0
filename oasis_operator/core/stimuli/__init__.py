"""Stimuli delivered during the agent's turn: when a temporal condition fires, what prior conversation the
request carries, and where a tool output injection goes. Pure: values in, values out."""
