"""Rollouts for training and evaluation: tasks x G episodes over warm sandboxes, their rewards,
results files, output folders and figures (:mod:`.runner` is the entry point)."""
