"""Validation: proving in real sandboxes that a spec is gradable (:mod:`.validate`), and the probes
that show each safety rule can fire (:mod:`.probes`)."""
