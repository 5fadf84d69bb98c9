"""Figure builders: each takes data from sdpa_ref and returns a Figure."""
